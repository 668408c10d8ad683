"""A chat choice's reasoning tokens (server/output/reasoning_tokens.py) on the shared case table
tests/parser_cases/reasoning_tokens.jsonl, as rust/server/src/output/reasoning_tokens.rs
runs it: each case's pieces (text, and the offsets where their tokens' text begins)
pushed through the reasoning parser, the count checked after every piece."""

from __future__ import annotations

from typing import Any

import pytest

from server.output.reasoning_tokens import ReasoningTokens
from server.parsers.reasoning import ReasoningParser, markers_of
from tests.server.case_tables import case_table

pytestmark = pytest.mark.unit

CASES = case_table("reasoning_tokens")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_table(case: dict[str, Any]) -> None:
    markers = markers_of(case["parser"])
    assert markers is not None
    parser = ReasoningParser(markers, case["prompt_inside"])
    tokens = ReasoningTokens()
    counts = []
    for i, (text, offsets) in enumerate(case["pieces"]):
        last = i + 1 == len(case["pieces"])
        parser.push(text)
        if last:
            parser.finish()
        tokens.count(parser, offsets, last)
        counts.append(tokens.total)
    assert counts == case["counts"]


def test_the_table_covers_every_parser_and_both_starts() -> None:
    assert {c["parser"] for c in CASES} == {"deepseek_r1", "qwen3", "granite", "mistral"}
    assert {c["prompt_inside"] for c in CASES} == {True, False}
