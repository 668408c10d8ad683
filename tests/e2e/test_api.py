"""The OpenAI API of every frontend (each test runs once per request mode), driven by the official
`openai` SDK and raw HTTP against the mock engine over the real wire."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.servers import MAX_MODEL_LEN, MODEL, Server, sse_events, wait_until

pytestmark = pytest.mark.e2e

USER = [{"role": "user", "content": "Say something 有趣 🌍"}]


def chat(client: openai.OpenAI, **kwargs: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=kwargs.pop("messages", USER),
                                          **kwargs)


def aborted(server: Server, request_id: str) -> bool:
    """The server logged that it aborted the engine request ``request_id``."""
    return any("aborting" in line and request_id in line for line in server.log().splitlines())


def test_models_and_health(server: Server) -> None:
    assert [m.id for m in server.client().models.list().data] == [MODEL]
    card = httpx.get(f"{server.url}/v1/models").json()["data"][0]
    assert card["max_model_len"] == MAX_MODEL_LEN and card["owned_by"] == "vrs"
    assert card["root"] and card["object"] == "model"
    health = httpx.get(f"{server.url}/health")
    assert health.status_code == 200 and health.content == b""


def test_chat_usage_counts_the_rendered_prompt(server: Server, tokenizer: Any) -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "你好, how are you? 👍🏽"}]
    response = chat(server.client(), messages=messages, max_tokens=16, seed=3)
    expected = tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                             tokenize=True, return_dict=False)
    assert response.id.startswith("chatcmpl-") and response.object == "chat.completion"
    assert response.model == MODEL
    choice = response.choices[0]
    assert choice.finish_reason == "length" and choice.message.role == "assistant"
    assert choice.message.content
    assert response.usage.prompt_tokens == len(expected)
    assert response.usage.completion_tokens == 16
    assert response.usage.total_tokens == len(expected) + 16


def test_chat_stream_equals_non_stream(server: Server) -> None:
    client = server.client()
    whole = chat(client, max_tokens=24, seed=11)
    chunks = list(chat(client, max_tokens=24, seed=11, stream=True,
                       stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[0].id.startswith("chatcmpl-")
    assert all(c.id == chunks[0].id and c.object == "chat.completion.chunk" for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])
    plain = list(chat(client, max_tokens=5, stream=True))
    assert plain[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in plain)


def test_completions_prompt_forms_and_streaming(server: Server, tokenizer: Any) -> None:
    client = server.client()
    prompt = "The quick brown fox 跳过 the lazy dog"
    ids = tokenizer.encode(prompt)
    as_text = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, seed=5)
    as_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=12, seed=5)
    as_list = client.completions.create(model=MODEL, prompt=[prompt], max_tokens=12, seed=5)
    assert as_text.object == "text_completion" and as_text.id.startswith("cmpl-")
    for response in (as_text, as_ids, as_list):
        assert response.usage.prompt_tokens == len(ids)
        assert response.usage.completion_tokens == 12
        assert response.usage.total_tokens == len(ids) + 12
        assert response.choices[0].finish_reason == "length"
    assert as_text.choices[0].text == as_ids.choices[0].text == as_list.choices[0].text
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, seed=5,
                                            stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == as_text.choices[0].text
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == as_text.usage.model_dump()
    assert all(c.object == "text_completion" for c in chunks)


def test_default_max_tokens_is_the_rest_of_the_context(server: Server) -> None:
    ids = [1000 + i for i in range(MAX_MODEL_LEN - 5)]
    response = server.client().completions.create(model=MODEL, prompt=ids,
                                                  extra_body={"ignore_eos": True})
    assert response.usage.completion_tokens == 5
    assert response.choices[0].finish_reason == "length"


@pytest.mark.parametrize("route", ["completions", "chat"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_stop_string_cuts_the_text_and_aborts(server: Server, route: str, stream: bool) -> None:
    client = server.client()

    def create(**kwargs: Any) -> Any:
        if route == "chat":
            return chat(client, max_tokens=40, seed=21, **kwargs)
        return client.completions.create(model=MODEL, prompt="Once upon", max_tokens=40,
                                         seed=21, **kwargs)

    def text_of(choice: Any) -> str:
        if route == "completions":
            return choice.text
        return (choice.delta if hasattr(choice, "delta") else choice.message).content or ""

    text = text_of(create().choices[0])
    stop = text[12:15]
    assert stop.strip(), f"pick another seed: {text!r}"
    expected = text[:text.index(stop)]
    if stream:
        chunks = list(create(stop=[stop, "\x00never"], stream=True,
                             stream_options={"include_usage": True}))
        got = "".join(text_of(c.choices[0]) for c in chunks if c.choices)
        finish, usage, request_id = (chunks[-2].choices[0].finish_reason, chunks[-1].usage,
                                     chunks[0].id)
    else:
        cut = create(stop=stop)
        got, finish, usage, request_id = (text_of(cut.choices[0]), cut.choices[0].finish_reason,
                                          cut.usage, cut.id)
    assert (got, finish) == (expected, "stop")
    assert 0 < usage.completion_tokens < 40
    assert wait_until(lambda: aborted(server, request_id), 5), "the engine request went on"


def test_sampling_fields_are_accepted(server: Server) -> None:
    response = chat(server.client(), max_completion_tokens=4, temperature=0.7, top_p=0.9,
                    seed=1, presence_penalty=0.5, frequency_penalty=0.5, user="me",
                    stop=["zzz"], n=1, logprobs=False,
                    extra_body={"top_k": 20, "min_p": 0.05, "min_tokens": 2,
                                "repetition_penalty": 1.1, "stop_token_ids": [1],
                                "ignore_eos": False, "skip_special_tokens": True,
                                "chat_template_kwargs": {"enable_thinking": True}})
    assert response.usage.completion_tokens <= 4


def test_fields_that_ask_for_nothing_are_accepted(server: Server) -> None:
    body = {"messages": USER, "max_tokens": 2, "n": 1, "logprobs": False, "top_logprobs": 0,
            "tools": [], "tool_choice": "none", "response_format": {"type": "text"},
            "logit_bias": {}, "user": "u", "seed": -5, "top_k": -1}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    body = {"prompt": "x", "max_tokens": 2, "suffix": "", "best_of": 1, "echo": False}
    response = httpx.post(f"{server.url}/v1/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text


def test_client_disconnect_aborts_the_engine_request(server: Server) -> None:
    body = {"model": MODEL, "prompt": "tell a long story", "max_tokens": 1900, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/completions", json=body, timeout=30) as resp:
        assert resp.status_code == 200
        first = next(line for line in resp.iter_lines() if line.startswith("data: "))
        request_id = json.loads(first.removeprefix("data: "))["id"]
    # 1900 tokens at >= 1 ms a step would take seconds; the abort ends it at once.
    assert wait_until(lambda: aborted(server, request_id), 5), server.log()[-3000:]
    # A non-streamed request whose client gives up is aborted too.
    before = server.log().count("aborting")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.url}/v1/completions", timeout=0.5,
                   json={"model": MODEL, "prompt": "wait", "max_tokens": 1900})
    assert wait_until(lambda: server.log().count("aborting") > before, 5), server.log()[-3000:]
    started = time.monotonic()
    assert chat(server.client(), max_tokens=2).choices[0].finish_reason == "length"
    assert time.monotonic() - started < 5


def test_raw_sse_framing(server: Server) -> None:
    body = {"model": MODEL, "messages": USER, "max_tokens": 3, "stream": True,
            "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body,
                      timeout=30) as resp:
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp.iter_lines())
    assert events[0]["choices"][0]["delta"]["role"] == "assistant"
    assert events[-1]["usage"]["completion_tokens"] == 3 and events[-1]["choices"] == []
