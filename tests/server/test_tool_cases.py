"""The shared tool-call case table (tests/parser_cases/tools.jsonl, also run by the Rust
unit tests) through the Python parser, in the three push modes of the spec: the whole text
at once, one character at a time, and for every split point k, text[:k] then text[k:].
Each gives the case's content, calls and finish_reason; no content piece holds text that
is not content (no leaked marker fragments); and the deltas have the streaming shape: a
call's first delta carries its id and name, later ones neither, indexes 0, 1, 2 in order."""

from __future__ import annotations

import re
from typing import Any

import pytest

from server.parsers.tools import CallAccumulator, CallDelta, ToolCallParser, ToolSettings
from tests.server.case_tables import case_table

pytestmark = pytest.mark.unit

CASES = case_table("tools")
CALL_ID = re.compile(r"call_[0-9a-f]{24}")
MISTRAL_ID = re.compile(r"[A-Za-z0-9]{9}")


def settings(case: dict[str, Any]) -> ToolSettings:
    choice = case.get("tool_choice", "auto")
    mode, name = (choice, None) if isinstance(choice, str) else ("named",
                                                                 choice["function"]["name"])
    return ToolSettings(case["tools"], mode, name, case.get("parallel", True))


def run(case: dict[str, Any], pieces: list[str]) -> tuple[list[str], list[CallDelta], str]:
    """(content pieces, call deltas, finish_reason) of the output pushed in ``pieces``."""
    parser = ToolCallParser(case["parser"], settings(case))
    content: list[str] = []
    deltas: list[CallDelta] = []
    for piece in [*(parser.push(p) for p in pieces), parser.finish()]:
        content.append(piece.content)
        deltas += piece.calls
    engine = case.get("engine_finish", "stop")
    finish = "tool_calls" if engine == "stop" and parser.calls_made else engine
    return content, deltas, finish


def check_shape(case: dict[str, Any], deltas: list[CallDelta]) -> None:
    seen = 0
    pattern = MISTRAL_ID if case["parser"] == "mistral" else CALL_ID
    for delta in deltas:
        if delta.index == seen:  # a call's first delta
            assert delta.id is not None and pattern.fullmatch(delta.id), delta
            assert delta.name is not None, delta
            seen += 1
        else:
            assert delta.index == seen - 1, "a call's pieces come after its first delta"
            assert delta.id is None and delta.name is None, delta


def check(case: dict[str, Any], pieces: list[str], how: str) -> None:
    content, deltas, finish = run(case, pieces)
    calls = CallAccumulator()
    calls.add(deltas)
    got = ("".join(content), [{"name": c.name, "arguments": c.arguments} for c in calls.calls],
           finish)
    assert got == (case["content"], case["calls"], case["finish"]), how
    for piece in content:
        assert piece in case["content"], f"{how}: content piece {piece!r} leaked"
    check_shape(case, deltas)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_in_three_push_modes(case: dict[str, Any]) -> None:
    text = case["text"]
    check(case, [text], "whole text")
    check(case, list(text), "one character at a time")
    for k in range(1, len(text)):
        check(case, [text[:k], text[k:]], f"split at {k}")


def test_the_table_covers_every_parser() -> None:
    from server.parsers.tools import TOOL_CALL_PARSERS

    assert {c["parser"] for c in CASES} >= set(TOOL_CALL_PARSERS)


def test_a_long_call_streams_its_arguments_in_pieces() -> None:
    case = next(c for c in CASES if c["name"] == "hermes_one_call")
    _, deltas, _ = run(case, list(case["text"]))
    assert deltas[0].name == "get_weather" and len(deltas) > 5
    assert "".join(d.arguments for d in deltas) == case["calls"][0]["arguments"]


PIECES = {
    "demo": ["<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"],
    "hermes": ["<tool_call>", "</tool_call>"],
    "llama3_json": ["<|python_tag|>", ";"],
    "mistral": ["[TOOL_CALLS]", "[ARGS]", "get_weather", "[", "]"],
    "deepseek_v3": ["<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "function",
                    "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>", "\n```json\n",
                    "\n```"],
    "granite": ["<|tool_call|>", "[", "]"],
    "qwen3_coder": ["<tool_call>", "</tool_call>", "<function=get_weather>", "</function>",
                    "<parameter=city>", "<parameter=days>", "</parameter>", "\n"],
    "pythonic": ["[", "]", "get_weather(", ")", "city=", "days=", "'x'", "3", "True",
                 "<|python_start|>", "<|python_end|>"],
}
COMMON = ['{"name": "get_weather", "arguments": ', '{"name": "get_time", "parameters": ',
          '{"city": "P"}', "{", "}", '"', "\\", "\\u00e9", " ", ",", "x", "東", "🌸"]


@pytest.mark.parametrize("parser", sorted(PIECES))
def test_random_outputs_split_anywhere_agree(parser: str) -> None:
    """Random mixes of the format's syntax: the text pushed whole and one character at a
    time give the same content and calls (and the parser never raises)."""
    import random

    rng = random.Random(15)
    tools = next(c["tools"] for c in CASES if c["name"] == f"{parser}_one_call")
    for _ in range(600):
        text = "".join(rng.choice(PIECES[parser] + COMMON) for _ in range(rng.randint(1, 14)))
        case = {"parser": parser, "tools": tools, "parallel": rng.random() < 0.8}
        results = []
        k = rng.randint(0, len(text))
        for pieces in ([text], list(text), [text[:k], text[k:]]):
            content, deltas, finish = run(case, pieces)
            calls = CallAccumulator()
            calls.add(deltas)
            check_shape(case, deltas)
            results.append(("".join(content), [(c.name, c.arguments) for c in calls.calls],
                            finish))
        assert results[0] == results[1] == results[2], text
