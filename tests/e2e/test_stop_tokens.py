"""EOS, stop_token_ids, min_tokens and ignore_eos, and a model without a chat template,
in the request modes (servers.ROUTE_MODES): the demo tokenizer with a mock vocabulary of
8 (ids 3..7 are ``! " # $ %``, EOS is 5, i.e. ``#``) and no chat template."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.servers import MODEL, ROUTE_MODES, Server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tiny_model(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = tmp_path_factory.mktemp("tiny-vocab")
    shutil.copyfile(demo_model / "tokenizer.json", model / "tokenizer.json")
    config = json.loads((demo_model / "tokenizer_config.json").read_text(encoding="utf-8"))
    del config["chat_template"]
    (model / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (model / "config.json").write_text(json.dumps(
        {"vocab_size": 8, "max_position_embeddings": 512, "eos_token_id": 5}))
    return model


@pytest.fixture(scope="module", params=ROUTE_MODES)
def tiny(request: pytest.FixtureRequest, tiny_model: Path) -> Iterator[Server]:
    server = Server(request.param, tiny_model, tiny_model / f"{request.param}.log",
                    max_model_len=None)
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def test_no_chat_template_refuses_chat_only(tiny: Server) -> None:
    response = httpx.post(f"{tiny.url}/v1/chat/completions", timeout=30,
                          json={"messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "BadRequestError" and "no chat template" in error["message"]
    out = tiny.client().completions.create(model=MODEL, prompt="hi", max_tokens=3,
                                           extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 3


def test_eos_is_counted_but_not_text(tiny: Server) -> None:
    client = tiny.client()
    stopped = 0
    for seed in range(8):
        out = client.completions.create(model=MODEL, prompt="hi", max_tokens=60, seed=seed)
        text, finish = out.choices[0].text, out.choices[0].finish_reason
        assert "#" not in text and set(text) <= set('!"$%')
        if finish == "stop":
            stopped += 1
            assert out.usage.completion_tokens == len(text) + 1
        else:
            assert finish == "length" and out.usage.completion_tokens == len(text) == 60
    assert stopped >= 6, "EOS (1 in 5 draws) should end most 60-token requests"


def test_stop_token_ids_min_tokens_ignore_eos(tiny: Server) -> None:
    client = tiny.client()
    out = client.completions.create(model=MODEL, prompt="hi", max_tokens=40, seed=1,
                                    extra_body={"ignore_eos": True})
    assert out.choices[0].finish_reason == "length" and "#" in out.choices[0].text
    out = client.completions.create(model=MODEL, prompt="hi", max_tokens=200, seed=1,
                                    extra_body={"ignore_eos": True, "stop_token_ids": [6]})
    assert out.choices[0].finish_reason == "stop" and "$" not in out.choices[0].text
    free = client.completions.create(model=MODEL, prompt="hi", max_tokens=200, seed=2)
    assert free.choices[0].finish_reason == "stop" and free.usage.completion_tokens < 50
    out = client.completions.create(model=MODEL, prompt="hi", max_tokens=200, seed=2,
                                    extra_body={"min_tokens": 50})
    assert out.usage.completion_tokens >= 50


def test_a_stop_string_ends_the_count_at_its_token(server: Server) -> None:
    """The usage (and logprobs) of a request cut by a stop string count the tokens up to the
    one that completes it, whether the engine's output carried one token or many: under
    load (filler requests in flight) the mock's steps come faster than they are sent, so
    its outputs carry several tokens each. Streamed or not."""
    base = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 48, "seed": 31,
            "logprobs": 0, "ignore_eos": True}
    whole = httpx.post(f"{server.url}/v1/completions", json=base, timeout=60).json()
    tokens = whole["choices"][0]["logprobs"]["tokens"]
    text = "".join(tokens)
    stop = text[2 * len(text) // 3:2 * len(text) // 3 + 3]
    expected = next(k for k in range(1, len(tokens) + 1) if stop in "".join(tokens[:k]))
    body = {**base, "stop": [stop]}
    filler = {"model": MODEL, "prompt": "x", "max_tokens": 1500, "ignore_eos": True}

    def post(json_body: dict[str, Any]) -> Any:
        return httpx.post(f"{server.url}/v1/completions", json=json_body, timeout=120).json()

    with ThreadPoolExecutor(9) as pool:
        fillers = [pool.submit(post, filler) for _ in range(8)]
        time.sleep(0.5)
        cuts = [post(body) for _ in range(3)]
        for future in fillers:
            future.result()
    for cut in cuts:
        choice = cut["choices"][0]
        assert choice["finish_reason"] == "stop"
        assert choice["text"] == text[:text.index(stop)]
        assert cut["usage"]["completion_tokens"] == expected
        assert len(choice["logprobs"]["tokens"]) == expected
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=streamed,
                      timeout=60) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines()
                  if line.startswith("data: {")]
    assert events[-1]["usage"]["completion_tokens"] == expected
