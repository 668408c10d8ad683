"""The reasoning parsers through the shared case table tests/parser_cases/reasoning.jsonl,
pushed whole, one character at a time and split at every point (as
rust/server/src/parsers/reasoning/tests.rs), and the prompt state that starts them inside."""

from __future__ import annotations

from typing import Any

import pytest

from server.parsers.markers import find_any, held_suffix_any, rfind_any
from server.parsers.reasoning import (
    ReasoningMarkers,
    ReasoningParser,
    markers_of,
    starts_inside,
)
from tests.server.case_tables import case_table

pytestmark = pytest.mark.unit

CASES = case_table("reasoning")


def run(markers: ReasoningMarkers, inside: bool,
        pieces: list[str]) -> tuple[str, str, list[str]]:
    """(reasoning, content) of ``pieces``, and every piece emitted on the way."""
    parser = ReasoningParser(markers, inside)
    emitted: list[str] = []
    for piece in pieces:
        emitted.extend(parser.push(piece))
    emitted.extend(parser.finish())
    return "".join(emitted[0::2]), "".join(emitted[1::2]), emitted


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_case_table_in_three_push_modes(case: dict[str, Any]) -> None:
    markers = markers_of(case["parser"])
    assert markers is not None
    text = case["text"]
    modes = [[text], list(text)] + [[text[:k], text[k:]] for k in range(len(text))]
    for pieces in modes:
        reasoning, content, emitted = run(markers, case["prompt_inside"], pieces)
        assert (reasoning, content) == (case["reasoning"], case["content"]), pieces
        for piece in emitted:
            assert piece in case["reasoning"] or piece in case["content"], piece


def test_the_table_covers_every_parser() -> None:
    assert len(CASES) >= 10
    assert {c["parser"] for c in CASES} == {"deepseek_r1", "qwen3", "granite", "mistral"}


def test_prompt_state() -> None:
    think = markers_of("qwen3")
    assert think is not None
    assert starts_inside(think, "<｜Assistant｜><think>")
    assert not starts_inside(think, "<｜Assistant｜></think>")
    assert not starts_inside(think, "<think>x</think> plain") and not starts_inside(think, "plain")
    granite = markers_of("granite")
    assert granite is not None
    assert starts_inside(granite, "sys\nHere's my thought process:")
    assert not starts_inside(granite, "write Here is my thought process: then Here is my response:")
    assert markers_of("openai") is None and markers_of(None) is None


def test_many_markers() -> None:
    ends = ("Here is my response:", "Here's my response:")
    assert held_suffix_any("x Here", ends) == 4
    assert held_suffix_any("x Here's my", ends) == len("Here's my")
    assert held_suffix_any("x", ends) == 0
    assert find_any("a [/THINK] b [THINK]", ("[THINK]", "[/THINK]")) == (2, 8)
    assert find_any("ab", ("[THINK]",)) is None
    assert find_any("<ab>", ("<a", "<ab>")) == (0, 4)
    assert rfind_any("<a> <b> <a>", ("<a>", "<b>")) == 8 and rfind_any("", ("<a>",)) == -1
