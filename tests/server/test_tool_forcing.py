"""Tools enforced by grammar: under ``tool_choice`` ``required`` or a named function the
engine request carries an xgrammar structural tag (compact JSON, keys in the spec's order).
``demo`` / ``hermes`` force natively: the tag constrains the output after the prompt's
prefill to the parser's call format. Every other parser uses the format-independent JSON
forcing (no prefill; the named function's ``parameters`` JSON, or a JSON array of
``{"name": N, "parameters": P}``), read back by the forced-JSON parser. Each call's
arguments follow its function's ``parameters``. The exact tag text is pinned here (the
Rust unit tests pin the same strings); a forcing ``tool_choice`` with another constraint is
refused, and a constrained chat answer is all content."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from engine import protocol as p
from server.edge.error import APIError
from server.logprobs import TokenTexts
from server.output.choice import ChatChoice
from server.output.generation import Piece
from server.parsers.reasoning import markers_of
from server.parsers.tools import (
    TOOL_CALL_PARSERS,
    ToolSettings,
    forced_tag,
    json_forced_tag,
)
from server.text import ModelText
from server.validate.prompt import PromptBuilder

pytestmark = pytest.mark.unit

USER = [{"role": "user", "content": "hi"}]
SO = "structured_outputs"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": CITY}}
NOW = {"type": "function", "function": {"name": "now"}}  # no parameters
DEMO, HERMES = TOOL_CALL_PARSERS["demo"], TOOL_CALL_PARSERS["hermes"]

CITY_ARGS = (
    '{"type":"json_schema","json_schema":{"type":"object","properties":{"city":'
    '{"type":"string"}},"required":["city"]},"max_whitespace_cnt":1}'
)
NO_ARGS = (
    '{"type":"json_schema","json_schema":{"type":"object","properties":{}},"max_whitespace_cnt":1}'
)


def settings(
    mode: str,
    name: str | None = None,
    parallel: bool = True,
    tools: list[dict[str, Any]] | None = None,
) -> ToolSettings:
    return ToolSettings(tools or [WEATHER, NOW], mode, name, parallel)


def call(name: str, args: str, end: str) -> str:
    prefix = json.dumps(f'{{"name": "{name}", "arguments": ', ensure_ascii=False)
    return (
        f'{{"type":"sequence","elements":[{{"type":"const_string","value":{prefix}}},'
        f'{args},{{"type":"const_string","value":"}}{end}"}}]}}'
    )


def test_named_function() -> None:
    assert forced_tag(HERMES, settings("named", "get_weather")) == (
        '{"type":"structural_tag","format":{"type":"sequence","elements":['
        + CITY_ARGS
        + ',{"type":"const_string","value":"}</tool_call>"}]}}'
    )
    assert forced_tag(DEMO, settings("named", "now")) == (
        '{"type":"structural_tag","format":{"type":"sequence","elements":['
        + NO_ARGS
        + ',{"type":"const_string","value":"}<｜tool▁call▁end｜>"}]}}'
    )


@pytest.mark.parametrize("fmt", [DEMO, HERMES], ids=["demo", "hermes"])
def test_required_with_parallel_calls(fmt: Any) -> None:
    calls = call("get_weather", CITY_ARGS, fmt.end) + "," + call("now", NO_ARGS, fmt.end)
    any_call = '{"type":"or","elements":[' + calls + "]}"
    assert forced_tag(fmt, settings("required")) == (
        '{"type":"structural_tag","format":{"type":"sequence","elements":['
        + any_call
        + ',{"type":"star","content":{"type":"sequence","elements":[{"type":"const_string",'
        f'"value":"{fmt.begin}"}},' + any_call + "]}}]}}"
    )


@pytest.mark.parametrize("fmt", [DEMO, HERMES], ids=["demo", "hermes"])
def test_required_one_call(fmt: Any) -> None:
    calls = call("get_weather", CITY_ARGS, fmt.end) + "," + call("now", NO_ARGS, fmt.end)
    assert forced_tag(fmt, settings("required", parallel=False)) == (
        '{"type":"structural_tag","format":{"type":"or","elements":[' + calls + "]}}"
    )


def test_a_single_tool_needs_no_or() -> None:
    only = call("get_weather", CITY_ARGS, HERMES.end)
    assert forced_tag(HERMES, settings("required", parallel=False, tools=[WEATHER])) == (
        '{"type":"structural_tag","format":' + only + "}"
    )
    assert forced_tag(HERMES, settings("required", tools=[WEATHER])) == (
        '{"type":"structural_tag","format":{"type":"sequence","elements":['
        + only
        + ',{"type":"star","content":{"type":"sequence","elements":[{"type":"const_string",'
        '"value":"<tool_call>"},' + only + "]}}]}}"
    )


def test_parameters_that_are_not_an_object_count_as_none() -> None:
    odd = {"type": "function", "function": {"name": "名", "parameters": "x"}}
    tag = forced_tag(HERMES, settings("required", parallel=False, tools=[odd]))
    assert tag == '{"type":"structural_tag","format":' + call("名", NO_ARGS, "</tool_call>") + "}"
    assert '"名' in tag  # non-ASCII kept as is


def test_nothing_is_forced_under_auto_and_none() -> None:
    assert forced_tag(DEMO, settings("auto")) is None
    assert forced_tag(DEMO, settings("none")) is None


def json_call(name: str, args: str) -> str:
    prefix = json.dumps(f'{{"name": "{name}", "parameters": ', ensure_ascii=False)
    return (
        f'{{"type":"sequence","elements":[{{"type":"const_string","value":{prefix}}},'
        f'{args},{{"type":"const_string","value":"}}"}}]}}'
    )


def test_format_independent_forcing() -> None:
    assert json_forced_tag(settings("named", "get_weather")) == (
        '{"type":"structural_tag","format":' + CITY_ARGS + "}"
    )
    any_call = ('{"type":"or","elements":[' + json_call("get_weather", CITY_ARGS) + ","
                + json_call("now", NO_ARGS) + "]}")
    assert json_forced_tag(settings("required", parallel=False)) == (
        '{"type":"structural_tag","format":{"type":"sequence","elements":['
        '{"type":"const_string","value":"["},' + any_call
        + ',{"type":"const_string","value":"]"}]}}'
    )
    assert json_forced_tag(settings("required")) == (
        '{"type":"structural_tag","format":{"type":"sequence","elements":['
        '{"type":"const_string","value":"["},' + any_call
        + ',{"type":"star","content":{"type":"sequence","elements":[{"type":"const_string",'
        '"value":", "},' + any_call + ']}},{"type":"const_string","value":"]"}]}}'
    )
    assert json_forced_tag(settings("auto")) is None


def test_the_tags_compile_with_xgrammar() -> None:
    xgrammar = pytest.importorskip("xgrammar")
    for tool_settings in (settings("required"), settings("required", parallel=False),
                          settings("named", "get_weather"), settings("named", "now")):
        tag = json_forced_tag(tool_settings)
        assert tag is not None
        xgrammar.Grammar.from_structural_tag(tag)
    for fmt in (DEMO, HERMES):
        for tool_settings in (
            settings("required"),
            settings("required", parallel=False),
            settings("named", "get_weather"),
            settings("named", "now"),
        ):
            tag = forced_tag(fmt, tool_settings)
            assert tag is not None
            xgrammar.Grammar.from_structural_tag(tag)


# --------------------------------------------------------------------------- chat requests


@pytest.fixture(scope="module")
def builder() -> PromptBuilder:
    from engine.mock.demo_model import ensure_demo_model

    class Limits:
        vocab_size = 1000
        max_model_len = 8192

    text = ModelText(str(Path(ensure_demo_model())))
    return PromptBuilder(text, "demo", Limits(), ThreadPoolExecutor(1), tool_parser="demo")


@pytest.fixture(scope="module")
def json_builder(builder: PromptBuilder) -> PromptBuilder:
    """The demo model with a parser that has no native forcing."""
    return PromptBuilder(builder.text, "demo", builder.limits, builder.executor,
                         tool_parser="qwen3_coder")


def chat(builder: PromptBuilder, **fields: Any) -> Any:
    body = json.dumps({"messages": USER, "tools": [WEATHER, NOW], **fields}).encode()
    return asyncio.run(builder.chat(body))


NAMED = {"type": "function", "function": {"name": "get_weather"}}


def test_a_forced_call_carries_its_tag(builder: PromptBuilder) -> None:
    required = chat(builder, tool_choice="required", parallel_tool_calls=False)
    assert required.text.endswith(DEMO.begin)
    assert required.settings.sampling.structured_outputs == p.StructuredOutputs(
        structural_tag=forced_tag(DEMO, settings("required", parallel=False))
    )
    assert required.settings.constraint == "tools"
    named = chat(builder, tool_choice=NAMED)
    assert named.text.endswith(DEMO.begin + '{"name": "get_weather", "arguments": ')
    assert named.settings.sampling.structured_outputs == p.StructuredOutputs(
        structural_tag=forced_tag(DEMO, settings("named", "get_weather"))
    )


def test_format_independent_forcing_has_no_prefill(json_builder: PromptBuilder) -> None:
    texts = TokenTexts(json_builder.text.backend)
    plain = chat(json_builder, tool_choice="auto")
    required = chat(json_builder, tool_choice="required")
    assert required.text == plain.text and required.settings.constraint == "tools"
    assert required.settings.sampling.structured_outputs == p.StructuredOutputs(
        structural_tag=json_forced_tag(settings("required")))
    output = '[{"name": "get_weather", "parameters": {"city": "Oslo"}}, {"name": "now", ' \
             '"parameters": {}}]'
    choice = ChatChoice(0, required.chat, True, None, texts)
    for i in range(0, len(output), 7):
        choice.step(Piece(output[i:i + 7], None, []))
    choice.step(Piece("", "stop", []))
    whole = choice.choice()
    assert [(c.function.name, c.function.arguments) for c in whole.message.tool_calls] == [
        ("get_weather", '{"city": "Oslo"}'), ("now", "{}")]
    assert (whole.message.content, whole.finish_reason) == (None, "tool_calls")
    named = chat(json_builder, tool_choice=NAMED)
    assert named.text == plain.text and not named.settings.stop
    choice = ChatChoice(0, named.chat, True, None, texts)
    choice.step(Piece('{"city": ', None, []))
    choice.step(Piece('"Rome"}', "stop", []))
    call = choice.choice().message.tool_calls[0]
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city": "Rome"}')


@pytest.mark.parametrize(
    "tool_choice, words", [("required", '"required"'), (NAMED, "naming `get_weather`")]
)
def test_forcing_a_tool_with_a_constraint_is_refused(
    builder: PromptBuilder, tool_choice: Any, words: str
) -> None:
    for fields, name in (
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({SO: {"choice": ["a"]}}, f"{SO}.choice"),
    ):
        with pytest.raises(APIError) as info:
            chat(builder, tool_choice=tool_choice, **fields)
        error = info.value
        assert (error.status, error.param, error.message) == (
            400,
            "tool_choice",
            f"`tool_choice` {words} cannot be combined with `{name}`",
        )


def test_auto_and_none_take_a_constraint(builder: PromptBuilder) -> None:
    for choice in ("auto", "none"):
        prompt = chat(builder, tool_choice=choice, response_format={"type": "json_object"})
        assert prompt.settings.sampling.structured_outputs == p.StructuredOutputs(json_object=True)
        assert prompt.settings.constraint == "response_format"
    free = chat(builder, tool_choice="auto")
    assert free.settings.sampling.structured_outputs is None and not free.chat.constrained


def test_a_constrained_chat_answer_is_all_content(builder: PromptBuilder) -> None:
    texts = TokenTexts(builder.text.backend)
    answer = "<think>plan</think>{}"
    for fields, content, reasoning in (
        ({}, "{}", "plan"),
        ({"response_format": {"type": "json_object"}}, answer, None),
        ({SO: {"regex": ".*"}}, answer, None),
    ):
        prompt = chat(builder, tool_choice="none", **fields)
        assert prompt.chat.constrained == bool(fields)
        choice = ChatChoice(0, prompt.chat, markers_of("qwen3"), None, texts)
        choice.step(Piece(answer, "stop", []))
        message = choice.choice().message
        assert (message.content, message.reasoning_content) == (content, reasoning)
