"""Tool calling in both request modes, through the official `openai` SDK: the demo
template's format parsed out of scripted mock replies (streamed and not), tool_choice
none / auto / required / named, parallel_tool_calls, the round trip of tool results, and
the checks that name the field."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.e2e.features import CALL_BEGIN, CALL_END, CLOCK_TOOL, WEATHER_TOOL, user
from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e

TOOLS = [WEATHER_TOOL, CLOCK_TOOL]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def chat(server: Server, text: str, **kwargs: Any) -> Any:
    kwargs.setdefault("tools", TOOLS)
    kwargs.setdefault("max_tokens", 60)
    return server.client().chat.completions.create(model=MODEL, messages=user(text),
                                                   **kwargs)


def streamed(server: Server, text: str, **kwargs: Any) -> tuple[str, list[dict[str, Any]], str]:
    """(content, tool calls as rebuilt from the deltas, finish reason): a call's first delta
    has its index, id, type and name; later ones only the index and an arguments piece."""
    content, calls, finish = "", [], ""
    for chunk in chat(server, text, stream=True, **kwargs):
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for call in choice.delta.tool_calls or ():
            if call.index == len(calls):
                assert call.id.startswith("call_") and call.type == "function"
                calls.append({"name": call.function.name, "arguments": ""})
            else:
                assert call.index == len(calls) - 1, "calls arrive in order"
                assert call.id is None and call.type is None and call.function.name is None
            calls[-1]["arguments"] += call.function.arguments or ""
        finish = choice.finish_reason or finish
    return content, calls, finish


def calls_of(message: Any) -> list[dict[str, Any]]:
    return [{"name": c.function.name, "arguments": c.function.arguments}
            for c in message.tool_calls or ()]


PARIS = [{"name": "get_weather", "arguments": '{"city": "Paris", "days": [1, 2]}'}]


def test_auto_parses_a_call_and_keeps_the_content(feature_server: Server) -> None:
    response = chat(feature_server, "[weather] in Paris?")
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me check."
    assert calls_of(choice.message) == PARIS
    assert json.loads(choice.message.tool_calls[0].function.arguments)["city"] == "Paris"
    assert streamed(feature_server, "[weather] in Paris?") == ("Let me check.", PARIS,
                                                               "tool_calls")


def test_auto_never_forces_a_call(feature_server: Server) -> None:
    response = chat(feature_server, "[script] no tools needed")
    choice = response.choices[0]
    assert (choice.message.content, choice.message.tool_calls) == (
        "alpha beta gamma delta epsilon", None)
    assert choice.finish_reason == "stop"
    random = chat(feature_server, "hello", max_tokens=12, seed=5).choices[0]
    assert random.message.tool_calls is None and random.finish_reason == "length"


def test_unterminated_or_broken_calls_stay_content(feature_server: Server) -> None:
    choice = chat(feature_server, "[broken call]").choices[0]
    assert choice.message.tool_calls is None
    assert choice.message.content == 'Hmm ' + CALL_BEGIN + '{"name": "get_weather", "arguments": '
    content, calls, _ = streamed(feature_server, "[broken call]")
    assert (content, calls) == (choice.message.content, [])


def test_none_leaves_the_markers_in_the_text(feature_server: Server) -> None:
    choice = chat(feature_server, "[weather]", tool_choice="none").choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "stop"
    assert CALL_BEGIN in choice.message.content and CALL_END in choice.message.content


def test_required_prefills_a_call(feature_server: Server) -> None:
    rome = [{"name": "get_weather", "arguments": '{"city": "Rome"}'}]
    choice = chat(feature_server, "anything", tool_choice="required").choices[0]
    assert (calls_of(choice.message), choice.finish_reason) == (rome, "tool_calls")
    assert choice.message.content is None
    assert streamed(feature_server, "anything", tool_choice="required") == ("", rome,
                                                                            "tool_calls")


def test_named_function_is_called(feature_server: Server) -> None:
    oslo = [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    choice = chat(feature_server, "anything", tool_choice=NAMED).choices[0]
    assert (calls_of(choice.message), choice.finish_reason) == (oslo, "tool_calls")
    assert streamed(feature_server, "anything", tool_choice=NAMED)[1:] == (oslo, "tool_calls")


def test_parallel_tool_calls(feature_server: Server) -> None:
    both = calls_of(chat(feature_server, "[two calls]").choices[0].message)
    assert [c["name"] for c in both] == ["get_weather", "get_time"]
    assert both[1]["arguments"] == "{}"
    one = chat(feature_server, "[two calls]", parallel_tool_calls=False).choices[0]
    assert [c["name"] for c in calls_of(one.message)] == ["get_weather"]
    assert one.finish_reason == "tool_calls"
    assert [c["name"] for c in streamed(feature_server, "[two calls]")[1]] == [
        "get_weather", "get_time"]


def test_tool_results_round_trip(feature_server: Server, tokenizer: Any) -> None:
    first = chat(feature_server, "[weather] in Paris?").choices[0].message
    messages = [*user("[weather] in Paris?"),
                {"role": "assistant", "content": first.content,
                 "tool_calls": [c.model_dump() for c in first.tool_calls]},
                {"role": "tool", "tool_call_id": first.tool_calls[0].id,
                 "content": '{"temp_c": 21}'}]
    follow = feature_server.client().chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, max_tokens=5, seed=1)
    assert follow.choices[0].finish_reason in ("length", "stop", "tool_calls")
    expected = tokenizer.apply_chat_template(messages, tools=TOOLS, add_generation_prompt=True,
                                             tokenize=True, return_dict=False)
    assert follow.usage.prompt_tokens == len(expected)
    tokens = httpx.post(f"{feature_server.url}/tokenize",
                        json={"messages": messages, "tools": TOOLS}, timeout=30).json()
    assert tokens["tokens"] == expected
    text = tokenizer.decode(expected)
    assert '<｜tool▁output▁begin｜>{"temp_c": 21}<｜tool▁output▁end｜>' in text
    assert CALL_BEGIN + '{"name": "get_weather", "arguments": {"city": "Paris"' in text


BAD = [
    ({"tool_choice": "required"}, "tool_choice", "needs `tools`"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}},
     "tool_choice", "not in `tools`"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice", "must be"),
    ({"tools": [{"type": "function"}]}, "tools[0].function", "name"),
    ({"tools": {"get_weather": {}}}, "tools", "list"),
    ({"tools": TOOLS, "parallel_tool_calls": "yes"}, "parallel_tool_calls", "invalid"),
]


@pytest.mark.parametrize("extra, param, words", BAD, ids=[b[1] + "-" + b[2] for b in BAD])
def test_bad_tool_settings_name_the_field(server: Server, extra: dict[str, Any], param: str,
                                          words: str) -> None:
    body = {"model": MODEL, "messages": user("hi"), **extra}
    response = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and words in error["message"], error
