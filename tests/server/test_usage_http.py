"""The usage shapes over HTTP (the Python server in-process, the mock engine, which has no prefix
cache: every count is 0): ``prompt_tokens_details.cached_tokens`` in every chat and
completions usage, whole and streamed; ``input_tokens_details`` in the Responses API;
Anthropic's cache split in the Messages API (``message_start`` without it)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

NONE_CACHED = {"cached_tokens": 0}
MESSAGES = [{"role": "user", "content": "hello there"}]


def lines(server: PythonServer, path: str, body: dict[str, Any]) -> list[str]:
    with httpx.stream("POST", f"{server.url}{path}", json={"model": MODEL, **body},
                      timeout=60) as response:
        assert response.status_code == 200, response.read()
        return [line for line in response.iter_lines() if line.startswith("data: ")]


def data(server: PythonServer, path: str, body: dict[str, Any]) -> list[Any]:
    return [json.loads(line.removeprefix("data: "))
            for line in lines(server, path, body) if line != "data: [DONE]"]


# Chat usage also has the reasoning tokens: the server's reasoning parser is qwen3 (auto:
# the demo template has <think>); completions have none.
@pytest.mark.parametrize("path, body, details", [
    ("/v1/chat/completions", {"messages": MESSAGES, "n": 2}, ["completion_tokens_details"]),
    ("/v1/completions", {"prompt": ["one prompt", "another"], "n": 2}, []),
])
def test_every_openai_usage_has_the_cached_tokens(python_server: PythonServer, path: str,
                                                 body: dict[str, Any],
                                                 details: list[str]) -> None:
    body = {**body, "max_tokens": 3}
    whole = python_server.post(path, body).json()
    usage = whole["usage"]
    assert usage["prompt_tokens_details"] == NONE_CACHED
    assert list(usage) == ["prompt_tokens", "completion_tokens", "total_tokens",
                           "prompt_tokens_details", *details]
    options = {"include_usage": True, "continuous_usage_stats": True}
    events = data(python_server, path, {**body, "stream": True, "stream_options": options})
    assert all(e["usage"]["prompt_tokens_details"] == NONE_CACHED for e in events)
    assert all(list(e["usage"])[4:] == details for e in events)
    assert events[-1]["choices"] == [] and events[-1]["usage"]["prompt_tokens"] == usage[
        "prompt_tokens"]


def test_responses_and_messages_usage(python_server: PythonServer) -> None:
    answer = python_server.post("/v1/responses", {"input": "hello there",
                                                  "max_output_tokens": 3}).json()
    assert answer["usage"]["input_tokens_details"] == {**NONE_CACHED, "cache_write_tokens": 0}

    body = {"messages": MESSAGES, "max_tokens": 3}
    message = python_server.post("/v1/messages", {"model": MODEL, **body}).json()
    usage = message["usage"]
    assert list(usage) == ["input_tokens", "cache_creation_input_tokens",
                           "cache_read_input_tokens", "output_tokens"]
    assert (usage["cache_creation_input_tokens"], usage["cache_read_input_tokens"]) == (0, 0)
    events = data(python_server, "/v1/messages", {**body, "stream": True})
    start = events[0]["message"]["usage"]
    assert start == {"input_tokens": usage["input_tokens"], "output_tokens": 0}
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"] == {**usage, "output_tokens": delta["usage"]["output_tokens"]}
