"""The Python frontend's streaming parsers (tool calls, reasoning), logprob shapes and
metrics text, unit by unit. The same cases as the Rust unit tests in
rust/server/src/parsers/{tools/tests,markers}.rs (reasoning: test_reasoning_cases.py) and
rust/server/src/edge/metrics.rs, so both frontends split text
the same way."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from engine import protocol as p
from server.edge.error import APIError
from server.edge.metrics import Metrics
from server.logprobs import clamp
from server.parsers.markers import held_suffix
from server.parsers.tools import (
    TOOL_CALL_PARSERS,
    CallAccumulator,
    ToolCallParser,
    ToolSettings,
    parse_call,
    prefill,
    tool_settings,
)

pytestmark = pytest.mark.unit

DEMO = TOOL_CALL_PARSERS["demo"]
TOOLS = [{"type": "function", "function": {"name": n}} for n in ("f", "g")]


def settings(mode: str, name: str | None = None, parallel: bool = True) -> ToolSettings:
    return ToolSettings(tools=TOOLS, mode=mode, name=name, parallel=parallel)


def run(parser: ToolCallParser, text: str) -> tuple[str, list]:
    """Feeds ``text`` one character at a time: markers split at every position."""
    content, calls = "", CallAccumulator()
    for ch in text:
        delta = parser.push(ch)
        content += delta.content
        calls.add(delta.calls)
    delta = parser.finish()
    calls.add(delta.calls)
    return content + delta.content, calls.calls


def test_held_suffix() -> None:
    assert held_suffix("abc<thi", "<think>") == 4
    assert held_suffix("abc", "<think>") == 0
    assert held_suffix("<think>", "<think>") == 0
    assert held_suffix("x<｜tool", DEMO.begin) == len("<｜tool")


def test_held_text_that_fails_is_content_up_to_the_failing_point() -> None:
    """The marker search resumes where the held text failed, not after its marker: a
    marker inside a body that turns out not to be a call does not start one."""
    text = '<tool_call>{"x": 1, "y": <tool_call>{"name": "f", "arguments": {}}}</tool_call>'
    content, calls = run(ToolCallParser("hermes", settings("auto")), text)
    assert (content, calls) == (text, [])
    text = '<tool_call>{"name": "nope", "arguments": {}} <tool_call>{"name": "f", "arguments": {}}'
    content, calls = run(ToolCallParser("hermes", settings("auto")), text)
    assert content == '<tool_call>{"name": "nope", "arguments": {}} '
    assert [(c.name, c.arguments) for c in calls] == [("f", "{}")]


def test_auto_splits_content_and_calls_across_any_piece_boundary() -> None:
    text = ('Hi <｜tool▁call▁begin｜>{"name": "f", "arguments": {"a": [1, 2]}}'
            '<｜tool▁call▁end｜> bye <｜tool▁call▁begin｜>{bad}<｜tool▁call▁end｜>')
    content, calls = run(ToolCallParser("demo", settings("auto")), text)
    # the whitespace after the first call's end marker is part of its closing syntax
    assert content == "Hi bye <｜tool▁call▁begin｜>{bad}<｜tool▁call▁end｜>"
    assert [(c.name, c.arguments) for c in calls] == [("f", '{"a": [1, 2]}')]
    assert calls[0].id.startswith("call_") and len(calls[0].id) == 29
    whole = ToolCallParser("demo", settings("auto"))
    first, rest = whole.push(text), whole.finish()
    assert first.content + rest.content == content and len(first.calls + rest.calls) == 1


def test_arguments_stream_as_they_arrive() -> None:
    parser = ToolCallParser("hermes", settings("auto"))
    assert parser.push('<tool_call>{"name": "f", ').calls == []  # before the commit point
    first = parser.push('"arguments": {"a": ')
    assert [(d.index, d.name, d.arguments) for d in first.calls] == [(0, "f", '{"a": ')]
    assert first.calls[0].id is not None
    later = parser.push('"x"}}</tool')
    assert [(d.index, d.id, d.name, d.arguments) for d in later.calls] == [
        (0, None, None, '"x"}')]
    assert parser.push("_call>").content == "" and parser.calls_made == 1


def test_auto_never_forces_a_call() -> None:
    parser = ToolCallParser("demo", settings("auto"))
    assert parser.push("plain <｜tool").content == "plain "
    assert parser.finish().content == "<｜tool"
    content, calls = run(ToolCallParser("demo", settings("auto")),
                         '{"name": "f", "arguments": {}}')
    assert (content, calls) == ('{"name": "f", "arguments": {}}', [])


def test_required_and_named_start_inside_a_call() -> None:
    content, calls = run(ToolCallParser("demo", settings("required")),
                         '{"name": "g", "arguments": "{\\"x\\": 1}"}<｜tool▁call▁end｜>')
    assert content == "" and [(c.name, c.arguments) for c in calls] == [("g", '{"x": 1}')]
    content, calls = run(ToolCallParser("demo", settings("named", "f")), '{"x": "é"}}')
    assert content == "" and [(c.name, c.arguments) for c in calls] == [("f", '{"x": "é"}')]
    # Text that is no call is never content under a forcing tool_choice (vLLM's rule).
    assert run(ToolCallParser("demo", settings("named", "f")), "oops") == ("", [])
    assert run(ToolCallParser("demo", settings("required")), "nope") == ("", [])
    assert run(ToolCallParser("demo", settings("required")), '{"na') == ("", [])


def test_parallel_false_keeps_the_first_call() -> None:
    call = '<｜tool▁call▁begin｜>{"name": "f", "arguments": {}}<｜tool▁call▁end｜>'
    assert len(run(ToolCallParser("demo", settings("auto", parallel=False)), call * 2)[1]) == 1
    assert len(run(ToolCallParser("demo", settings("auto")), call * 2)[1]) == 2


def test_call_bodies() -> None:
    assert parse_call(' {"arguments":{} ,"name":"x" } ') == ("x", "{}")
    assert parse_call('{"parameters": {"a": 1}, "name": "x"}') == ("x", '{"a": 1}')
    assert parse_call('{"name": "f", "arguments": NaN}') is None
    assert parse_call('{"name": "f", "name": "g", "arguments": 1}') is None
    assert parse_call('["f", {}]') is None
    assert parse_call('{"name": 1, "arguments": {}}') is None
    assert parse_call('{"name": "f"}') is None
    assert parse_call('{"name": "f", "arguments": {}} x') is None
    assert parse_call('{"name": "f", "arguments": [1,  2]}') is None
    assert parse_call('{"name": "f", "arguments": {}, "x": 1, "x": 2}') == ("f", "{}")


def request(tools: object = None, choice: object = None, parallel: bool | None = None) -> object:
    return SimpleNamespace(tools=tools, tool_choice=choice, parallel_tool_calls=parallel)


def test_settings_checks_name_the_field() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    assert tool_settings(request(tools), "demo").mode == "auto"
    assert tool_settings(request(), None).mode == "none"
    named = {"type": "function", "function": {"name": "f"}}
    got = tool_settings(request(tools, named, False), "demo")
    assert (got.mode, got.name, got.parallel) == ("named", "f", False)
    cases = [
        ("x", tools, "demo", "tool_choice", "must be"),
        ("required", None, "demo", "tool_choice", "needs `tools`"),
        ({"type": "function", "function": {"name": "g"}}, tools, "demo", "tool_choice",
         "not in `tools`"),
        ("auto", tools, None, "tool_choice", "--tool-call-parser"),
        ("none", {}, None, "tools", "expected a list"),
        ("none", [1], None, "tools[0]", "`type`"),
        ("none", [{"type": "function"}], None, "tools[0].function", "name"),
    ]
    for choice, given, parser, param, words in cases:
        with pytest.raises(APIError) as info:
            tool_settings(request(given, choice), parser)
        assert info.value.param == param and words in info.value.message, choice


def test_named_prefill() -> None:
    assert prefill(DEMO, settings("named", 'a"b')) == (
        '<｜tool▁call▁begin｜>{"name": "a\\"b", "arguments": ')


def test_clamp_and_metrics_text() -> None:
    assert clamp(-math.inf) == clamp(math.nan) == clamp(-1e6) == -9999.0
    assert clamp(-0.5) == -0.5
    metrics = Metrics()
    for seconds in (0.00005, 0.003, 1000):
        metrics.ttft.observe(seconds)
    metrics.request("/v1/completions", 200)
    metrics.request("/v1/completions", 200)
    metrics.request("/nope", 404)
    metrics.tokens(prompt=7)
    stats = p.SchedulerStats(num_running=2, prefix_cache_queries=4, prefix_cache_hits=1)
    lines = metrics.render({0: stats}, 3).decode().splitlines()
    for line in [
        'vrs:time_to_first_token_seconds_bucket{le="0.0001"} 1',
        'vrs:time_to_first_token_seconds_bucket{le="0.0025"} 1',
        'vrs:time_to_first_token_seconds_bucket{le="0.005"} 2',
        'vrs:time_to_first_token_seconds_bucket{le="300"} 2',
        'vrs:time_to_first_token_seconds_bucket{le="+Inf"} 3',
        "vrs:time_to_first_token_seconds_count 3",
        'vrs:http_requests_total{endpoint="/v1/completions",status="200"} 2',
        'vrs:http_requests_total{endpoint="other",status="404"} 1',
        "vrs:prompt_tokens_total 7",
        "vrs:requests_in_flight 3",
        'vrs:num_requests_running{engine="0"} 2',
        'vrs:prefix_cache_hit_rate{engine="0"} 0.25',
        'vrs:kv_cache_usage_perc{engine="0"} 0.0',
        "# TYPE vrs:e2e_request_latency_seconds histogram",
    ]:
        assert line in lines, line
