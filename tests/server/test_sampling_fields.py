"""``logit_bias``, ``allowed_token_ids``, ``bad_words`` and ``prompt_logprobs``: each bad
value is a 400 naming its field (over HTTP, the Python server in-process), good values
are accepted (test_render_wire_fields.py: they reach the engine as the wire's fields),
and ``bad_words`` are tokenized by the frontend's tokenizer; plus the queue / prefill
histograms on /metrics and the 405's ``Allow`` header, as vrs-rs writes them."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import tokenizers

from server.validate.sampling import bad_words_ids
from tests.server.server_kit import PythonServer

pytestmark = pytest.mark.server

USER = [{"role": "user", "content": "hi"}]
VOCAB = 129280  # the demo model's vocab_size


@pytest.mark.parametrize(
    "route, extra, param, words",
    [
        ("chat", {"logit_bias": {"abc": 1}}, "logit_bias", '"abc" is not a token id'),
        ("completions", {"logit_bias": {"5": 101}}, "logit_bias", "got 101"),
        ("completions", {"logit_bias": {"5": -100.5}}, "logit_bias", "got -100.5"),
        ("chat", {"logit_bias": {"5": "x"}}, "logit_bias", "must be a number"),
        ("chat", {"logit_bias": {str(VOCAB): 1}}, "logit_bias", f"size {VOCAB}"),
        ("completions", {"logit_bias": {"-1": 1}}, "logit_bias", '"-1" is out of the vocabulary'),
        ("completions", {"logit_bias": [1, 2]}, "logit_bias", "must be an object"),
        ("completions", {"allowed_token_ids": []}, "allowed_token_ids", "non-empty list"),
        ("chat", {"allowed_token_ids": [1, "2"]}, "allowed_token_ids", "list of token ids"),
        ("chat", {"allowed_token_ids": [1, VOCAB]}, "allowed_token_ids", f"token id {VOCAB}"),
        ("completions", {"allowed_token_ids": 5}, "allowed_token_ids", "list of token ids"),
        ("chat", {"bad_words": "x"}, "bad_words", "list of strings"),
        ("completions", {"bad_words": ["x", 1]}, "bad_words", "list of strings"),
        ("completions", {"prompt_logprobs": 21}, "prompt_logprobs", "[0, 20], got 21"),
        ("chat", {"prompt_logprobs": -1}, "prompt_logprobs", "got -1"),
        ("chat", {"prompt_logprobs": "2"}, "prompt_logprobs", "Expected `int"),
        ("chat", {"echo": "yes"}, "echo", "Expected `bool"),
    ],
)
def test_bad_values_are_400_naming_the_field(
    python_server: PythonServer, route: str, extra: dict[str, Any], param: str, words: str
) -> None:
    body = {"messages": USER} if route == "chat" else {"prompt": "x"}
    response = python_server.post(
        f"/v1/{'chat/' if route == 'chat' else ''}completions", {**body, "max_tokens": 2, **extra}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "BadRequestError", error
    assert words in error["message"], error


def test_good_values_are_accepted(python_server: PythonServer) -> None:
    body = {
        "max_tokens": 2,
        "logit_bias": {"70": -100, "+5": 100, "6": 0.5},
        "allowed_token_ids": [5, 6, 7],
        "bad_words": ["x", " hello world"],
        "prompt_logprobs": 0,
    }
    for path, extra in (
        ("/v1/chat/completions", {"messages": USER}),
        ("/v1/completions", {"prompt": "x"}),
    ):
        response = python_server.post(path, {**body, **extra})
        assert response.status_code == 200, response.text


def test_bad_words_become_the_tokenizers_id_sequences(demo_model: Path) -> None:
    backend = tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))

    def encode(text: str) -> list[int]:
        return backend.encode(text, add_special_tokens=False).ids

    words = ["  hello world", "x", "hello world", ""]
    expected = [
        encode("hello world"),
        encode(" hello world"),
        encode("x"),
        encode(" x"),
        encode(" "),
    ]
    unique = [ids for i, ids in enumerate(expected) if ids and ids not in expected[:i]]
    assert bad_words_ids(words, encode) == unique
    assert len(unique) >= 4, "the two variants of a word differ"


def test_queue_and_prefill_histograms(python_server: PythonServer) -> None:
    def counts() -> dict[str, float]:
        text = httpx.get(f"{python_server.url}/metrics", timeout=10).text
        found = {}
        for name in ("queue", "prefill", "inference"):
            match = re.search(
                rf'^vllm:request_{name}_time_seconds_count\{{model_name="demo",'
                r'engine="0"\} (\S+)$',
                text,
                re.MULTILINE,
            )
            assert match, name
            found[name] = float(match.group(1))
            assert f"# TYPE vllm:request_{name}_time_seconds histogram" in text
            assert (
                f'vllm:request_{name}_time_seconds_bucket{{model_name="demo",engine="0",'
                'le="7680.0"}' in text
            )
        return found

    before = counts()
    python_server.post("/v1/completions", {"prompt": ["a", "b"], "n": 2, "max_tokens": 2})
    deadline = 50
    while counts()["queue"] < before["queue"] + 4 and deadline:
        deadline -= 1
        time.sleep(0.1)
    after = counts()
    assert {k: after[k] - before[k] for k in after} == dict.fromkeys(after, 4.0)


def test_method_not_allowed_lists_the_methods_as_vrs_rs(python_server: PythonServer) -> None:
    for method, path, allow in (
        ("PUT", "/ping", "GET,HEAD,POST"),
        ("POST", "/v1/models", "GET,HEAD"),
        ("GET", "/v1/completions", "POST"),
    ):
        response = httpx.request(method, f"{python_server.url}{path}", timeout=10)
        assert response.status_code == 405, (method, path)
        assert response.headers["allow"] == allow
    head = httpx.head(f"{python_server.url}/ping", timeout=10)
    assert head.status_code == 200 and head.content == b""
