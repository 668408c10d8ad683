"""vLLM's SageMaker routes in both request modes: ``GET|POST /ping`` answers like
``/health``; ``POST /invocations`` sends a body with ``messages`` to chat completions and
one with ``prompt`` to completions (streaming included), and anything else to a 400 that
names both. The API key, the body limit and admission on ``/invocations`` are in
test_hardening.py (they need a guarded server); ``/ping`` turning 503 in test_lifecycle."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.e2e.servers import MAX_MODEL_LEN, MODEL, Server, sse_events

pytestmark = pytest.mark.e2e

USER = [{"role": "user", "content": "Say something 有趣 🌍"}]
NO_HANDLER = ("Cannot find suitable handler for request. Expected one of: a chat completion "
              "request (with `messages`), a completion request (with `prompt`)")


def post(server: Server, path: str, body: Any) -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{server.url}{path}", content=content, timeout=60,
                      headers={"content-type": "application/json"})


def stream(server: Server, path: str, body: dict[str, Any]) -> list[Any]:
    with httpx.stream("POST", f"{server.url}{path}", json={**body, "stream": True},
                      timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return sse_events(response.iter_lines())


def test_ping_answers_get_and_post_like_health(server: Server) -> None:
    for method in ("GET", "POST"):
        response = httpx.request(method, f"{server.url}/ping", timeout=10)
        assert (response.status_code, response.content) == (200, b""), method
    response = httpx.put(f"{server.url}/ping", timeout=10)
    assert response.status_code == 405 and response.json()["error"]["code"] == 405


def test_invocations_with_messages_is_a_chat_completion(server: Server) -> None:
    body = {"model": MODEL, "messages": USER, "max_tokens": 12, "seed": 5}
    direct = post(server, "/v1/chat/completions", body).json()
    invoked = post(server, "/invocations", body)
    assert invoked.status_code == 200, invoked.text
    assert invoked.headers["content-type"] == "application/json"
    got = invoked.json()
    assert got["object"] == "chat.completion" and got["id"].startswith("chatcmpl-")
    assert got["choices"] == direct["choices"] and got["usage"] == direct["usage"]
    events = stream(server, "/invocations", body)
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    text = "".join(e["choices"][0]["delta"].get("content") or "" for e in events
                   if e["choices"])
    assert text == direct["choices"][0]["message"]["content"]


def test_invocations_with_prompt_is_a_completion(server: Server) -> None:
    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 12, "seed": 7}
    direct = post(server, "/v1/completions", body).json()
    invoked = post(server, "/invocations", body)
    assert invoked.status_code == 200, invoked.text
    got = invoked.json()
    assert got["object"] == "text_completion" and got["id"].startswith("cmpl-")
    assert got["choices"] == direct["choices"] and got["usage"] == direct["usage"]
    events = stream(server, "/invocations", {**body, "stream_options": {"include_usage": True}})
    assert all(e["object"] == "text_completion" and e["id"] == events[0]["id"] for e in events)
    assert "".join(e["choices"][0]["text"] for e in events if e["choices"]) == (
        direct["choices"][0]["text"])
    assert events[-1]["usage"] == direct["usage"]


BAD_INVOCATIONS = [
    # (id, body, param, words the message must contain)
    ("neither", {"model": MODEL, "max_tokens": 3}, None, NO_HANDLER),
    ("null-messages", {"messages": None}, None, NO_HANDLER),
    ("malformed-json", b'{"messages": [', None, "invalid JSON"),
    ("empty-body", b"  ", None, "empty"),
    ("not-an-object", [1, 2], None, "JSON object"),
    ("chat-checks", {"messages": []}, "messages", "empty"),
    ("completion-checks", {"prompt": "x", "top_p": 0}, "top_p", "(0, 1]"),
    ("both-is-chat", {"messages": USER, "prompt": "x"}, "prompt", "unknown field `prompt`"),
    ("max-completion-tokens", {"messages": USER, "max_completion_tokens": 10**6},
     "max_completion_tokens", f"maximum context length is {MAX_MODEL_LEN}"),
    ("unknown-model", {"model": "gpt-9", "prompt": "x"}, "model", "`gpt-9` does not exist"),
]


@pytest.mark.parametrize("body, param, words", [case[1:] for case in BAD_INVOCATIONS],
                         ids=[case[0] for case in BAD_INVOCATIONS])
def test_bad_invocations_get_the_endpoints_errors(server: Server, body: Any,
                                                  param: str | None, words: str) -> None:
    response = post(server, "/invocations", body)
    assert response.status_code in (400, 404), response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["code"], error["param"]) == (response.status_code, param), error
    assert words in error["message"], error["message"]


def test_invocations_is_post_only(server: Server) -> None:
    response = httpx.get(f"{server.url}/invocations", timeout=10)
    assert response.status_code == 405, response.text
    assert response.json()["error"]["message"] == "Method Not Allowed: GET /invocations"
