"""Request features of issue 5 through the official `openai` SDK, streamed and not, on
both request modes: n, logprobs / top_logprobs, echo, max_completion_tokens, user,
skip_special_tokens, stop strings on a scripted reply, and the fields that are refused."""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest

from tests.e2e.features import EXPECTED_SCRIPT, user
from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e

HELLO = user("Say something 有趣 🌍")


def chat(server: Server, **kwargs: Any) -> Any:
    return server.client().chat.completions.create(
        model=MODEL, messages=kwargs.pop("messages", HELLO), **kwargs)


def completion(server: Server, **kwargs: Any) -> Any:
    return server.client().completions.create(model=MODEL, **kwargs)


def collect_chat(stream: Any) -> dict[int, dict[str, Any]]:
    """Per choice index: text, finish reason, logprob entries; and the usage chunk."""
    out: dict[int, dict[str, Any]] = {}
    for chunk in stream:
        if not chunk.choices:
            out[-1] = {"usage": chunk.usage}
        for choice in chunk.choices:
            slot = out.setdefault(choice.index, {"text": "", "finish": None, "lp": [],
                                                 "roles": 0})
            slot["roles"] += choice.delta.role == "assistant"
            slot["text"] += choice.delta.content or ""
            if choice.logprobs is not None:
                slot["lp"] += choice.logprobs.content
            if choice.finish_reason:
                assert slot["finish"] is None, "one finish per choice"
                slot["finish"] = choice.finish_reason
    return out


def test_n_fans_out_into_choices(feature_server: Server) -> None:
    whole = chat(feature_server, n=3, max_tokens=6, seed=4)
    assert [c.index for c in whole.choices] == [0, 1, 2]
    assert all(c.finish_reason == "length" for c in whole.choices)
    assert whole.usage.completion_tokens == 18
    texts = [c.message.content for c in whole.choices]
    assert len(set(texts)) == 3, "each choice samples with its own seed"
    streamed = collect_chat(chat(feature_server, n=3, max_tokens=6, seed=4, stream=True,
                                 stream_options={"include_usage": True}))
    assert [streamed[i]["text"] for i in range(3)] == texts
    assert all(streamed[i]["roles"] == 1 and streamed[i]["finish"] == "length"
               for i in range(3))
    assert streamed[-1]["usage"].completion_tokens == 18
    assert streamed[-1]["usage"].prompt_tokens == whole.usage.prompt_tokens
    two = completion(feature_server, prompt="hello", n=2, max_tokens=5, seed=9)
    assert [c.index for c in two.choices] == [0, 1] and two.usage.completion_tokens == 10
    single = chat(feature_server, max_tokens=6, seed=4)
    assert single.choices[0].message.content == texts[0], "choice 0 keeps the seed"


def test_chat_logprobs(feature_server: Server) -> None:
    whole = chat(feature_server, max_tokens=8, seed=2, logprobs=True, top_logprobs=3)
    entries = whole.choices[0].logprobs.content
    assert len(entries) == 8
    for entry in entries:
        assert entry.logprob <= 0 and entry.bytes == list(entry.token.encode())
        assert len(entry.top_logprobs) == 3
        tops = [t.logprob for t in entry.top_logprobs]
        assert tops == sorted(tops, reverse=True)
        assert sum(math.exp(t) for t in tops) <= 1.0 + 1e-9
        if entry.token in [t.token for t in entry.top_logprobs]:
            assert entry.logprob in tops
    streamed = collect_chat(chat(feature_server, max_tokens=8, seed=2, logprobs=True,
                                 top_logprobs=3, stream=True))
    assert [e.model_dump() for e in streamed[0]["lp"]] == [e.model_dump() for e in entries]
    bare = chat(feature_server, max_tokens=3, logprobs=True)
    assert all(e.top_logprobs == [] for e in bare.choices[0].logprobs.content)
    assert chat(feature_server, max_tokens=3).choices[0].logprobs is None


def test_completion_logprobs_and_offsets(feature_server: Server) -> None:
    whole = completion(feature_server, prompt="hello", max_tokens=6, seed=8, logprobs=2)
    lp = whole.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.text_offset) == 6
    assert lp.text_offset[0] == 0
    for i in range(1, 6):
        assert lp.text_offset[i] == lp.text_offset[i - 1] + len(lp.tokens[i - 1])
    assert all(1 <= len(top) <= 2 for top in lp.top_logprobs)
    chunks = list(completion(feature_server, prompt="hello", max_tokens=6, seed=8, logprobs=2,
                             stream=True))
    streamed = [t for c in chunks for t in (c.choices[0].logprobs.tokens if c.choices else [])]
    assert streamed == lp.tokens
    offsets = [o for c in chunks for o in c.choices[0].logprobs.text_offset]
    assert offsets == lp.text_offset
    zero = completion(feature_server, prompt="hello", max_tokens=2, logprobs=0)
    assert zero.choices[0].logprobs.top_logprobs == [{}, {}]


def test_echo(feature_server: Server, tokenizer: Any) -> None:
    whole = completion(feature_server, prompt="Once upon a time", max_tokens=4, seed=1,
                       echo=True)
    plain = completion(feature_server, prompt="Once upon a time", max_tokens=4, seed=1)
    assert whole.choices[0].text == "Once upon a time" + plain.choices[0].text
    chunks = list(completion(feature_server, prompt="Once upon a time", max_tokens=4, seed=1,
                             echo=True, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == whole.choices[0].text
    ids = tokenizer.encode("Once upon", add_special_tokens=False)
    by_ids = completion(feature_server, prompt=ids, max_tokens=2, echo=True)
    assert by_ids.choices[0].text.startswith("Once upon")


def test_max_completion_tokens_user_and_special_tokens(feature_server: Server) -> None:
    response = chat(feature_server, max_completion_tokens=5, user="alice", seed=3)
    assert response.usage.completion_tokens == 5
    hidden = completion(feature_server, prompt="[special]", max_tokens=20)
    assert hidden.choices[0].text == "ab" and hidden.choices[0].finish_reason == "stop"
    shown = completion(feature_server, prompt="[special]", max_tokens=20,
                       extra_body={"skip_special_tokens": False})
    assert shown.choices[0].text == "a<｜begin▁of▁sentence｜>b"


@pytest.mark.parametrize("stream", [False, True])
def test_stop_strings_on_a_scripted_reply(feature_server: Server, stream: bool) -> None:
    def run(**kwargs: Any) -> tuple[str, str]:
        kwargs.setdefault("max_tokens", 40)
        if not stream:
            r = completion(feature_server, prompt="[script]", **kwargs)
            return r.choices[0].text, r.choices[0].finish_reason
        chunks = list(completion(feature_server, prompt="[script]", stream=True, **kwargs))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        return text, [c.choices[0].finish_reason for c in chunks if c.choices][-1]

    assert run() == (EXPECTED_SCRIPT, "stop")
    assert run(stop=["ta gam"]) == ("alpha be", "stop"), "a stop string across tokens"
    assert run(stop=["zzz", "delta"]) == ("alpha beta gamma ", "stop")
    assert run(max_tokens=2)[1] == "length"


REFUSED = [
    ("chat", {"guided_regex": 5}, "guided_regex"),
    ("chat", {"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
    ("chat", {"functions": [{"name": "f"}]}, "functions"),
    ("chat", {"reasoning_effort": "huge"}, "reasoning_effort"),
    ("completions", {"best_of": 2}, "best_of"),
    ("completions", {"suffix": "end"}, "suffix"),
    ("chat", {"n": 0}, "n"),
    ("completions", {"n": 129}, "n"),
    ("chat", {"logprobs": True, "top_logprobs": 21}, "top_logprobs"),
    ("chat", {"top_logprobs": 2}, "top_logprobs"),
    ("chat", {"logprobs": 1}, "logprobs"),
    ("completions", {"logprobs": 21}, "logprobs"),
    ("completions", {"logprobs": True}, "logprobs"),
    ("chat", {"stream": False, "stream_options": {"continuous_usage_stats": True}},
     "stream_options"),
    ("chat", {"logit_bias": {"5": 1000}}, "logit_bias"),
    ("completions", {"prompt_logprobs": 21}, "prompt_logprobs"),
    ("completions", {"prompt": ["x"] * 257}, "prompt"),
]


@pytest.mark.parametrize("route, extra, param", REFUSED,
                         ids=[f"{r}-{p}" for r, _, p in REFUSED])
def test_unsupported_values_are_refused_naming_the_field(server: Server, route: str,
                                                         extra: dict[str, Any],
                                                         param: str) -> None:
    body = {"messages": HELLO} if route == "chat" else {"prompt": "x"}
    path = "/v1/chat/completions" if route == "chat" else "/v1/completions"
    response = httpx.post(f"{server.url}{path}", content=json.dumps({**body, **extra}),
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "BadRequestError", error
    assert param in error["message"] or "invalid" in error["message"], error
