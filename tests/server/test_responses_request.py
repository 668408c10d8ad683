"""The Responses body -> chat request translation (server/routes/responses/request.py): every
item kind, the merges of function_call items, tools / tool_choice / text / reasoning, and
each refusal naming its field path."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server.edge.error import APIError
from server.routes.responses.request import Translated, translate

pytestmark = pytest.mark.unit

FC = {"type": "function_call", "call_id": "call_1", "name": "get_weather",
      "arguments": '{"city": "Paris"}'}
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}


def run(**body: Any) -> Translated:
    return translate(json.dumps(body).encode())


def refused(param: str, message: str | None = None, **body: Any) -> None:
    with pytest.raises(APIError) as info:
        run(**body)
    assert (info.value.status, info.value.param) == (400, param), info.value.message
    if message is not None:
        assert info.value.message == message


def test_string_input_and_instructions() -> None:
    out = run(model="demo", input="hi", instructions="be brief", max_output_tokens=9,
              temperature=0.5, top_p=0.9, stop=["x"], seed=3, top_k=4, user="u", stream=True)
    assert out.chat == {
        "model": "demo", "messages": [{"role": "system", "content": "be brief"},
                                      {"role": "user", "content": "hi"}],
        "max_completion_tokens": 9, "temperature": 0.5, "top_p": 0.9, "stop": ["x"],
        "seed": 3, "top_k": 4, "user": "u", "stream": True}
    assert out.stream and out.echo.instructions == "be brief"
    assert (out.echo.temperature, out.echo.top_p, out.echo.max_output_tokens) == (0.5, 0.9, 9)
    plain = run(input="hi")
    assert plain.chat == {"messages": [{"role": "user", "content": "hi"}]}
    assert (plain.echo.temperature, plain.echo.top_p, plain.echo.tool_choice) == (
        1.0, 1.0, "auto")
    assert plain.echo.text_format == {"type": "text"} and not plain.stream


def test_message_items_roles_and_parts() -> None:
    out = run(input=[
        {"role": "developer", "content": "rules"},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "c", "annotations": []}]}])
    assert out.chat["messages"] == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": [{"type": "text", "text": "a"},
                                     {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "c"}]}]


def test_function_calls_merge_and_outputs_follow() -> None:
    second = {**FC, "call_id": "call_2", "arguments": "{}"}
    out = run(input=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Let me check."}, FC, second,
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "call_2",
         "output": [{"type": "input_text", "text": "1"}, {"type": "input_text", "text": "2"}]},
        FC | {"call_id": "call_3"}])
    assert out.chat["messages"] == [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            CALL, {**CALL, "id": "call_2", "function": {**CALL["function"], "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "12"},
        {"role": "assistant", "tool_calls": [{**CALL, "id": "call_3"}]}]


def test_reasoning_items_go_to_the_next_assistant_turn() -> None:
    thought = {"type": "reasoning", "summary": [], "content": [
        {"type": "reasoning_text", "text": "think"}]}
    out = run(input=[{"role": "user", "content": "q"}, thought, FC,
                     {"type": "function_call_output", "call_id": "call_1", "output": "ok"},
                     thought, {"role": "assistant", "content": "done"}, thought])
    assert out.chat["messages"][1:] == [
        {"role": "assistant", "tool_calls": [CALL], "reasoning_content": "think"},
        {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        {"role": "assistant", "content": "done", "reasoning_content": "think"},
        {"role": "assistant", "content": "", "reasoning_content": "think"}]


def test_tools_choice_text_and_reasoning() -> None:
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"},
            "description": "d", "strict": True}
    out = run(input="x", tools=[tool], tool_choice={"type": "function", "name": "f"},
              parallel_tool_calls=False,
              text={"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"},
                               "strict": True}, "verbosity": "medium"},
              reasoning={"effort": "low", "summary": "auto"},
              metadata={"k": "v"}, store=False, stream_options={"include_obfuscation": False},
              service_tier="auto")
    assert out.chat["tools"] == [{"type": "function", "function": {
        "name": "f", "description": "d", "parameters": {"type": "object"}, "strict": True}}]
    assert list(out.chat["tools"][0]["function"]) == ["name", "description", "parameters",
                                                       "strict"]
    assert out.chat["tool_choice"] == {"type": "function", "function": {"name": "f"}}
    assert out.chat["parallel_tool_calls"] is False and out.echo.parallel_tool_calls is False
    assert out.chat["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "n", "schema": {"type": "object"}, "strict": True}}
    # chat's reasoning_effort, which applies vLLM's rule: no refusal when the template
    # reads no effort (it renders without it)
    assert out.chat["reasoning_effort"] == "low" and "chat_template_kwargs" not in out.chat
    assert (out.echo.effort, out.echo.summary, out.echo.metadata) == ("low", "auto", {"k": "v"})
    assert out.echo.tools == [tool] and out.echo.tool_choice == {"type": "function", "name": "f"}
    assert run(input="x", text={"format": {"type": "json_object"}}).chat["response_format"] == {
        "type": "json_object"}
    assert "response_format" not in run(input="x", text={"format": {"type": "text"}}).chat
    assert run(input="x", tool_choice="required").chat["tool_choice"] == "required"
    assert "reasoning_effort" not in run(input="x", reasoning={"effort": None}).chat


@pytest.mark.parametrize(("param", "message", "body"), [
    ("frobnicate", "unknown field 'frobnicate'", {"input": "x", "frobnicate": 1}),
    ("store", "invalid value for 'store': expected a boolean", {"input": "x", "store": 1}),
    ("previous_response_id", "invalid value for 'previous_response_id': expected a string",
     {"input": "x", "previous_response_id": 5}),
    ("background", "background can only be used when `store` is true",
     {"input": "x", "background": True, "store": False}),
    ("background", "background can only be used when `store` is true",
     {"input": "x", "background": True, "store": None}),
    ("background", None, {"input": "x", "background": "yes"}),
    ("conversation", None, {"input": "x", "conversation": "c"}),
    ("prompt", None, {"input": "x", "prompt": {"id": "p"}}),
    ("include[1]", None, {"input": "x", "include": ["reasoning.encrypted_content",
                                                     "message.output_text.text"]}),
    ("include", None, {"input": "x", "include": "message.output_text.logprobs"}),
    ("truncation", None, {"input": "x", "truncation": "auto"}),
    ("top_logprobs", None, {"input": "x", "top_logprobs": 21}),
    ("top_logprobs", None, {"input": "x", "top_logprobs": -1}),
    ("top_logprobs", None, {"input": "x", "top_logprobs": 2.0}),
    ("max_tool_calls", None, {"input": "x", "max_tool_calls": 2}),
    ("input", None, {}),
    ("input", None, {"input": 5}),
    ("input[0].type", "input item type 'item_reference' is not supported",
     {"input": [{"type": "item_reference", "id": "x"}]}),
    ("input[1].role", None, {"input": [{"role": "user", "content": "a"},
                                       {"role": "tool", "content": "b"}]}),
    ("input[0].content[1].type", "content part type 'input_image' is not supported",
     {"input": [{"role": "user", "content": [{"type": "input_text", "text": "a"},
                                             {"type": "input_image", "image_url": "u"}]}]}),
    ("input[0].content[0].text", None,
     {"input": [{"role": "user", "content": [{"type": "input_text"}]}]}),
    ("input[0].call_id", "function_call_output for unknown call_id 'nope'",
     {"input": [{"type": "function_call_output", "call_id": "nope", "output": "x"}]}),
    ("input[0].arguments", None, {"input": [FC | {"arguments": {"city": "x"}}]}),
    ("tools[1].type", "built-in tool 'web_search' is not supported: only function tools",
     {"input": "x", "tools": [{"type": "function", "name": "f"}, {"type": "web_search"}]}),
    ("tools[0].name", None, {"input": "x", "tools": [{"type": "function"}]}),
    ("tool_choice", None, {"input": "x", "tool_choice": "always"}),
    ("tool_choice", None, {"input": "x", "tool_choice": {"type": "web_search"}}),
    ("text.verbosity", None, {"input": "x", "text": {"verbosity": "low"}}),
    ("text.format.type", None, {"input": "x", "text": {"format": {"type": "grammar"}}}),
    ("text.format.schema", None,
     {"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}}),
    ("reasoning.effort", None, {"input": "x", "reasoning": {"effort": 1}}),
    ("reasoning.summary", None, {"input": "x", "reasoning": {"summary": "long"}}),
    ("input[0].summary", None, {"input": [{"type": "reasoning", "summary": ""}]}),
    ("input[0].content", None, {"input": [{"type": "reasoning", "content": ""}]}),
    ("max_output_tokens", None, {"input": "x", "max_output_tokens": 0}),
    ("max_output_tokens", None, {"input": "x", "max_output_tokens": "5"}),
    ("metadata.k", None, {"input": "x", "metadata": {"k": 1}}),
    ("stream", None, {"input": "x", "stream": "yes"}),
    ("stream_options.include_usage", None,
     {"input": "x", "stream_options": {"include_usage": True}}),
])
def test_refusals_name_the_field(param: str, message: str | None, body: dict[str, Any]) -> None:
    refused(param, message, **body)


def test_body_must_be_a_json_object() -> None:
    for raw in (b"", b"[1]", b"{", b'"x"'):
        with pytest.raises(APIError) as info:
            translate(raw)
        assert info.value.status == 400 and info.value.param is None


def test_chat_field_names_map_back() -> None:
    from server.routes.responses.request import responses_param

    assert [responses_param(p) for p in (
        None, "max_completion_tokens", "response_format", "response_format.json_schema.schema",
        "tools[2].function.parameters", "tools[0].function", "reasoning_effort",
        "messages[1].content", "temperature", "messages")] == [
        None, "max_output_tokens", "text.format", "text.format.schema",
        "tools[2].parameters", "tools[0]", "reasoning.effort", "messages[1].content",
        "temperature", "input"]
