"""A forced tool call (`tool_choice` required or named) cut by `max_tokens`, in both request
modes, through chat (JSON and SSE), the Responses API and the Messages API: as in vLLM 0.33,
the forced output is calls only, so text that is no call yet (a call cut before its name is
complete) never leaks into `content` / `output_text` / a text block; a named call cut in
its arguments is a call with the arguments so far (docs/api.md, "Tool calls"). The feature
server's scripted replies (tests/e2e/features.py) answer the prefilled forced prompts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.features import CLOCK_TOOL, WEATHER_TOOL, user
from tests.e2e.servers import MODEL, Server, sse_events

pytestmark = pytest.mark.e2e

TOOLS = [WEATHER_TOOL, CLOCK_TOOL]
NAMED = {"type": "function", "function": {"name": "get_weather"}}
# Three tokens of the scripted required reply '{"name": "get_weather", ...': the name is
# not complete, so no call has started.
CUT = 3


def chat(server: Server, **extra: Any) -> Any:
    body = {"model": MODEL, "messages": user("anything"), "tools": TOOLS, "max_tokens": CUT,
            **extra}
    with server.http() as http:
        answer = http.post(f"{server.url}/v1/chat/completions", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def chat_stream(server: Server, **extra: Any) -> list[Any]:
    body = {"model": MODEL, "messages": user("anything"), "tools": TOOLS, "max_tokens": CUT,
            "stream": True, **extra}
    with server.http() as http, http.stream("POST", f"{server.url}/v1/chat/completions",
                                            json=body) as answer:
        assert answer.status_code == 200
        return sse_events(answer.iter_lines())


def test_required_cut_before_a_call_leaks_nothing(feature_server: Server) -> None:
    choice = chat(feature_server, tool_choice="required")["choices"][0]
    assert choice["message"]["content"] == ""
    assert "tool_calls" not in choice["message"]
    assert choice["finish_reason"] == "length"
    events = chat_stream(feature_server, tool_choice="required")
    deltas = [c["delta"] for e in events if isinstance(e, dict) for c in e["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == ""
    assert not any(d.get("tool_calls") for d in deltas)
    assert events[-1]["choices"][0]["finish_reason"] == "length"


def test_named_cut_in_its_arguments_is_a_call(feature_server: Server) -> None:
    choice = chat(feature_server, tool_choice=NAMED, max_tokens=2)["choices"][0]
    assert choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    assert '{"city": "Oslo"}'.startswith(call["function"]["arguments"])
    assert call["function"]["arguments"] and choice["finish_reason"] == "length"


def test_responses_cut_before_a_call_has_no_output_text(feature_server: Server) -> None:
    tools = [{"type": "function", "name": "get_weather",
              "parameters": WEATHER_TOOL["function"]["parameters"]}]
    body = {"model": MODEL, "input": "anything", "tools": tools, "tool_choice": "required",
            "max_output_tokens": CUT}
    with feature_server.http() as http:
        answer = http.post(f"{feature_server.url}/v1/responses", json=body)
        assert answer.status_code == 200, answer.text
        response = answer.json()
        assert (response["status"], response["output"]) == ("incomplete", [])
        with http.stream("POST", f"{feature_server.url}/v1/responses",
                         json={**body, "stream": True}) as streamed:
            lines = [line for line in streamed.iter_lines() if line.startswith("data: ")]
    types = [json.loads(line.removeprefix("data: "))["type"] for line in lines]
    assert "response.output_text.delta" not in types and "response.output_item.added" not in types
    assert types[-1] == "response.incomplete"


def test_messages_cut_before_a_call_has_no_text_block(feature_server: Server) -> None:
    tools = [{"name": "get_weather", "input_schema": WEATHER_TOOL["function"]["parameters"]}]
    body = {"model": MODEL, "max_tokens": CUT, "messages": user("anything"), "tools": tools,
            "tool_choice": {"type": "any"}}
    with feature_server.http() as http:
        answer = http.post(f"{feature_server.url}/v1/messages", json=body)
    assert answer.status_code == 200, answer.text
    message = answer.json()
    assert (message["content"], message["stop_reason"]) == ([], "max_tokens")
