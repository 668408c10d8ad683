"""The three frontends answer the same seeded requests with the same bodies: text (hence
token ids: the mock engine's tokens are a function of the seed and the prompt ids), finish
reasons, usage and every other field but the request id and the clock."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from servers import MODEL, MODES, Pool, sse_events

CHAT = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße, 世界! 👋🏽 What's 2+2?"}]
REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("ids-prompt", "/v1/completions", {"prompt": [1000, 2000, 3000, 4000], "max_tokens": 20,
                                       "seed": 1}),
    ("text-prompt", "/v1/completions", {"prompt": "天気は 🌧️, then", "max_tokens": 24,
                                        "seed": 2}),
    ("chat", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 16, "seed": 3}),
    ("chat-sampling", "/v1/chat/completions", {
        "messages": CHAT, "max_completion_tokens": 12, "seed": 4, "temperature": 0.5,
        "top_p": 0.9, "top_k": 50, "min_tokens": 3, "stop_token_ids": [7]}),
    ("ignore-eos", "/v1/completions", {"prompt": "x", "max_tokens": 30, "seed": 5,
                                       "ignore_eos": True}),
    ("special-tokens-kept", "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 10,
                                                "seed": 6, "skip_special_tokens": False}),
]


def normalised(body: Any) -> Any:
    """The body without the per-request id and timestamp."""
    if isinstance(body, dict):
        return {k: normalised(v) for k, v in body.items() if k not in ("id", "created")}
    if isinstance(body, list):
        return [normalised(v) for v in body]
    return body


def ask(pool: Pool, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answers = {}
    for mode in MODES:
        response = httpx.post(f"{pool.get(mode).url}{path}", json={"model": MODEL, **body},
                              timeout=60)
        answers[mode] = (response.status_code, normalised(response.json()))
    return answers


@pytest.mark.parametrize(("path", "body"), [r[1:] for r in REQUESTS],
                         ids=[r[0] for r in REQUESTS])
def test_same_request_same_body(pool: Pool, path: str, body: dict[str, Any]) -> None:
    answers = ask(pool, path, body)
    first = answers[MODES[0]]
    assert first[0] == 200, first
    for mode in MODES[1:]:
        assert answers[mode] == first, f"{mode} differs from {MODES[0]}"


def stream(pool: Pool, mode: str, path: str, body: dict[str, Any]) -> list[Any]:
    body = {"model": MODEL, **body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{pool.get(mode).url}{path}", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        return [normalised(event) for event in sse_events(resp.iter_lines())]


@pytest.mark.parametrize(("path", "body"), [r[1:] for r in REQUESTS[:3]],
                         ids=[r[0] for r in REQUESTS[:3]])
def test_same_request_same_stream(pool: Pool, path: str, body: dict[str, Any]) -> None:
    """Text, finish and usage agree (how text splits into chunks may differ)."""
    def summary(events: list[Any]) -> tuple[str, Any, Any]:
        pieces = [c["choices"][0] for c in events if c["choices"]]
        text = "".join(p.get("text") or p.get("delta", {}).get("content") or "" for p in pieces)
        return text, pieces[-1]["finish_reason"], events[-1]["usage"]

    results = {mode: summary(stream(pool, mode, path, body)) for mode in MODES}
    whole = ask(pool, path, body)[MODES[0]][1]
    choice = whole["choices"][0]
    expected = (choice.get("text", (choice.get("message") or {}).get("content")),
                choice["finish_reason"], whole["usage"])
    assert results == dict.fromkeys(MODES, expected)


def test_same_stop_string_cut(pool: Pool) -> None:
    base = {"prompt": "Once upon", "max_tokens": 40, "seed": 21}
    text = ask(pool, "/v1/completions", base)[MODES[0]][1]["choices"][0]["text"]
    answers = ask(pool, "/v1/completions", {**base, "stop": [text[10:13]]})
    assert len({repr(answer) for answer in answers.values()}) == 1, answers
    assert answers[MODES[0]][1]["choices"][0]["finish_reason"] == "stop"
