"""Anthropic Messages bodies -> chat requests (server/routes/messages/request.py): every
translation rule, and every refusal naming its field path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.edge.error import APIError
from server.routes.messages.request import translate

pytestmark = pytest.mark.unit

BASE = {"model": "demo", "max_tokens": 64}
WEATHER = {"name": "get_weather", "description": "The weather.",
           "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
CALL = {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
        "input": {"city": "Zürich", "days": [1, 2], "a": 1.5}}


def chat(body: dict[str, Any], reasoning: bool = True, count: bool = False) -> dict[str, Any]:
    return translate(json.dumps(body).encode(), reasoning=reasoning, count=count)


def refusal(body: dict[str, Any] | bytes, reasoning: bool = True,
            count: bool = False) -> tuple[int, str | None, str]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(APIError) as info:
        translate(raw, reasoning=reasoning, count=count)
    return info.value.status, info.value.param, info.value.message


def test_plain_text_and_system() -> None:
    out = chat({**BASE, "system": "Be brief.", "messages": [
        {"role": "user", "content": "hi"}]})
    assert out == {"model": "demo", "messages": [
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "max_tokens": 64}
    blocks = chat({**BASE, "system": [{"type": "text", "text": "a"},
                                      {"type": "text", "text": "b",
                                       "cache_control": {"type": "ephemeral"}}],
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}]})
    assert blocks["messages"] == [{"role": "system", "content": "ab"},
                                  {"role": "user", "content": [{"type": "text", "text": "x"}]}]


def test_tool_loop_translation() -> None:
    out = chat({**BASE, "tools": [WEATHER], "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "s"},
            {"type": "text", "text": "Let me check."}, CALL]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "21C"},
            {"type": "text", "text": "and tomorrow?"},
            {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
             "content": [{"type": "text", "text": "down"}, {"type": "text", "text": "now"}]}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]}]})
    assert out["messages"] == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me check."}],
         "tool_calls": [{"id": "toolu_1", "type": "function", "function": {
             "name": "get_weather", "arguments": '{"city":"Zürich","days":[1,2],"a":1.5}'}}],
         "reasoning_content": "hmm"},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "21C"},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "Error: down\nnow"},
        {"role": "user", "content": [{"type": "text", "text": "and tomorrow?"}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": ""}]
    assert out["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather.",
        "parameters": WEATHER["input_schema"]}}]
    only_call = chat({**BASE, "messages": [{"role": "user", "content": "x"},
                                           {"role": "assistant", "content": [CALL]}]})
    assert "content" not in only_call["messages"][1]


def test_options() -> None:
    out = chat({**BASE, "max_tokens": 2000, "messages": [{"role": "user", "content": "x"}],
                "tools": [{**WEATHER, "type": "custom"}],
                "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
                "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 5,
                "seed": 3, "stream": True, "metadata": {"user_id": "u1"},
                "service_tier": "auto", "thinking": {"type": "enabled", "budget_tokens": 1024}})
    assert {k: v for k, v in out.items() if k not in ("model", "messages", "tools")} == {
        "max_tokens": 2000, "tool_choice": "required", "parallel_tool_calls": False,
        "stop": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 5, "seed": 3,
        "stream": True, "user": "u1", "chat_template_kwargs": {"enable_thinking": True},
        "thinking_token_budget": 1024}
    for given, want in (({"type": "auto"}, "auto"), ({"type": "none"}, "none"),
                        ({"type": "tool", "name": "get_weather"},
                         {"type": "function", "function": {"name": "get_weather"}})):
        body = {**BASE, "messages": [{"role": "user", "content": "x"}], "tool_choice": given}
        assert chat(body)["tool_choice"] == want
    off = chat({**BASE, "messages": [{"role": "user", "content": "x"}],
                "thinking": {"type": "disabled"}}, reasoning=False)
    assert off["chat_template_kwargs"] == {"enable_thinking": False}


def test_count_tokens_needs_no_max_tokens() -> None:
    out = chat({"model": "demo", "messages": [{"role": "user", "content": "x"}]}, count=True)
    assert out == {"model": "demo", "messages": [{"role": "user", "content": "x"}]}
    assert refusal({**BASE, "messages": [{"role": "user", "content": "x"}], "stream": False},
                   count=True) == (400, "stream", "stream is not supported by count_tokens")


M = [{"role": "user", "content": "x"}]
REFUSALS = [
    ({"model": "demo", "messages": M}, "max_tokens", "Field required"),
    ({**BASE, "messages": M, "max_tokens": 0}, "max_tokens", "invalid value: expected an "
     "integer >= 1"),
    ({**BASE, "messages": M, "max_tokens": True}, "max_tokens", "expected an integer"),
    ({**BASE}, "messages", "Field required"),
    ({"max_tokens": 5, "messages": M}, "model", "Field required"),
    ({**BASE, "messages": []}, "messages", "at least one message"),
    ({**BASE, "messages": M, "frobnicate": 1}, "frobnicate", "unknown field 'frobnicate'"),
    ({**BASE, "messages": M, "container": "c"}, "container", "not supported"),
    ({**BASE, "messages": M, "mcp_servers": []}, "mcp_servers", "not supported"),
    ({**BASE, "messages": M, "context_management": {}}, "context_management", "not supported"),
    ({**BASE, "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role",
     "expected 'user', 'assistant' or 'system', got 'tool'"),
    ({**BASE, "messages": [{"role": "user"}]}, "messages[0].content", "Field required"),
    ({**BASE, "messages": [{"role": "user", "content": "x", "name": "n"}]},
     "messages[0].name", "unknown field 'name'"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "messages[0].content[0].type", "content block type 'image' is not supported"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "document"}]}]},
     "messages[0].content[0].type", "content block type 'document' is not supported"),
    ({**BASE, "messages": [{"role": "user", "content": [{"text": "x"}]}]},
     "messages[0].content[0].type", "Field required"),
    ({**BASE, "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
     "messages[0].content[0].text", "expected a string"),
    ({**BASE, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "r"}]}]},
     "messages[0].content[0].tool_use_id", "tool_result for unknown tool_use_id 'toolu_9'"),
    ({**BASE, "messages": [{"role": "user", "content": [
        {"type": "redacted_thinking", "data": "x"}]}]},
     "messages[0].content[0].type",
     "content block type 'redacted_thinking' is not supported in a user message"),
    ({**BASE, "messages": [*M, {"role": "assistant", "content": [{**CALL, "input": "{}"}]}]},
     "messages[1].content[0].input", "expected an object"),
    ({**BASE, "messages": [{"role": "user", "content": [CALL]}]},
     "messages[0].content[0].type", "not supported in a user message"),
    ({**BASE, "messages": [{"role": "user", "content": []}]}, "messages[0].content",
     "at least one content block"),
    ({**BASE, "messages": M, "system": [{"type": "image"}]}, "system[0].type",
     "content block type 'image' is not supported"),
    ({**BASE, "messages": M, "tools": [{**WEATHER, "type": "web_search_20250305"}]},
     "tools[0].type", "tool type 'web_search_20250305' is not supported"),
    ({**BASE, "messages": M, "tools": [{"name": "f"}]}, "tools[0].input_schema",
     "Field required"),
    ({**BASE, "messages": M, "tool_choice": {"type": "sometimes"}}, "tool_choice.type",
     "expected 'auto', 'any', 'tool' or 'none'"),
    ({**BASE, "messages": M, "tool_choice": {"type": "tool"}}, "tool_choice.name",
     "Field required"),
    ({**BASE, "messages": M, "stop_sequences": ["a", 1]}, "stop_sequences[1]",
     "expected a string"),
    ({**BASE, "messages": M, "temperature": "hot"}, "temperature", "expected a number"),
    ({**BASE, "messages": M, "metadata": {"trace": "t"}}, "metadata.trace",
     "unknown field 'trace'"),
    ({**BASE, "messages": M, "thinking": {"type": "enabled", "budget_tokens": 512}},
     "thinking.budget_tokens", "expected an integer >= 1024"),
    ({**BASE, "messages": M, "thinking": {"type": "enabled", "budget_tokens": 2048}},
     "thinking.budget_tokens", "budget_tokens (2048) must be less than max_tokens (64)"),
    ({**BASE, "messages": M, "thinking": {"type": "sometimes"}}, "thinking.type",
     "expected 'enabled', 'disabled' or 'adaptive', got 'sometimes'"),
]


@pytest.mark.parametrize("body, param, words", REFUSALS,
                         ids=[f"{r[1]}-{r[2][:24]}" for r in REFUSALS])
def test_refusals_name_the_field(body: dict[str, Any], param: str, words: str) -> None:
    status, got_param, message = refusal(body)
    assert (status, got_param) == (400, param), message
    assert words in message


def test_thinking_needs_a_reasoning_parser() -> None:
    body = {"model": "demo", "max_tokens": 4096, "messages": M,
            "thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert refusal(body, reasoning=False) == (
        400, "thinking", "thinking needs a reasoning parser: start the server with "
        "--reasoning-parser")


def test_bodies_that_are_not_objects() -> None:
    assert refusal(b"")[2].startswith("the request body is empty")
    assert refusal(b"[1]")[2] == "the request body must be a JSON object"
    assert refusal(b"{")[2].startswith("invalid JSON in the request body")
