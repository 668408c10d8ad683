"""Beam search on the real engine behind each request mode (the demo model): width 1 is
greedy decoding, whole and streamed, chat and completions; a wider search answers `n`
distinct beams, the best first. (The beams' likelihood against greedy's is checked on the
engine itself: tests/engine/test_beam_search.py; the same beams from both frontends on the
mock engine: test_parity.py; the refusals: tests/request_cases/bad_requests.json.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.e2e.servers import MODEL, Server, sse_events

pytestmark = pytest.mark.e2e

MAX_TOKENS = 8
CHAT = [{"role": "user", "content": "Name three colours."}]


def post(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{server.url}{path}", json={"model": MODEL, **body}, timeout=120)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def choices(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c.get("text", (c.get("message") or {}).get("content")), c["finish_reason"])
            for c in answer["choices"]]


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/completions", {"prompt": "The weather in 北京 today"}),
    ("/v1/chat/completions", {"messages": CHAT}),
], ids=["completions", "chat"])
def test_width_one_is_greedy(real_server: Server, path: str, body: dict[str, Any]) -> None:
    body = {**body, "max_tokens": MAX_TOKENS, "ignore_eos": True}
    greedy = post(real_server, path, {**body, "temperature": 0})
    beam = post(real_server, path, {**body, "use_beam_search": True, "temperature": 1.3})
    assert choices(beam) == choices(greedy)
    assert beam["usage"]["completion_tokens"] == greedy["usage"]["completion_tokens"] \
        == MAX_TOKENS
    assert beam["usage"]["prompt_tokens"] == greedy["usage"]["prompt_tokens"]


def test_a_wider_search_answers_n_distinct_beams(real_server: Server) -> None:
    body = {"prompt": "def fibonacci(n):", "max_tokens": MAX_TOKENS, "n": 3,
            "use_beam_search": True, "ignore_eos": True, "length_penalty": 0.0}
    answer = post(real_server, "/v1/completions", body)
    got = choices(answer)
    assert [c["index"] for c in answer["choices"]] == [0, 1, 2]
    assert len({text for text, _ in got}) == 3
    assert {finish for _, finish in got} == {"length"}
    assert answer["usage"]["completion_tokens"] == 3 * MAX_TOKENS
    # The same search again finds the same beams (greedy steps: nothing is sampled).
    assert choices(post(real_server, "/v1/completions", body)) == got


def test_chat_streams_the_beams(real_server: Server) -> None:
    body = {"model": MODEL, "messages": CHAT, "max_tokens": MAX_TOKENS, "n": 2,
            "use_beam_search": True, "ignore_eos": True}
    whole = post(real_server, "/v1/chat/completions", body)
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{real_server.url}/v1/chat/completions", json=streamed,
                      timeout=120) as response:
        assert response.status_code == 200
        events = list(sse_events(response.iter_lines()))
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    for event in events:
        for piece in event["choices"]:
            texts[piece["index"]] = texts.get(piece["index"], "") + (
                piece["delta"].get("content") or "")
            if piece["finish_reason"] is not None:
                finishes[piece["index"]] = piece["finish_reason"]
    assert [(texts[i], finishes[i]) for i in sorted(texts)] == choices(whole)
    assert events[-1]["usage"] == whole["usage"]
