"""The thinking budget's rule (engine/thinking_budget.py), token by token: where a section
opens (the prompt, the output), what counts, when the end marker is forced and what
closes a section; and the engine's guard on a budget it cannot honour."""

from __future__ import annotations

from typing import Any

import pytest

from engine import protocol as p
from engine.thinking_budget import ThinkingState, budget_error

pytestmark = pytest.mark.unit

START, END = 100, 101  # one-token markers
END2 = [102, 103]  # a two-token end marker, listed first: the forced one


def spec(budget: int, start: list[list[int]] | None = None,
         end: list[list[int]] | None = None) -> p.ThinkingBudget:
    return p.ThinkingBudget(budget=budget, start_token_ids=start or [[START]],
                            end_token_ids=end or [[END]])


def drive(state: ThinkingState, free: list[int], steps: int) -> list[int]:
    """``steps`` tokens: the forced one where there is one, else the next of ``free``."""
    out = []
    pending = iter(free)
    for _ in range(steps):
        forced = state.forced()
        token = forced if forced is not None else next(pending)
        state.advance(token)
        out.append(token)
    return out


def test_a_prompt_left_open_counts_its_own_tokens() -> None:
    # The prompt ends "<think> 7 8": the section is open and holds 2 tokens already, so a
    # budget of 5 leaves 3 for the output, then the end marker is forced.
    state = ThinkingState(spec(5), [1, 2, START, 7, 8])
    assert state.is_open and state.count == 2
    assert drive(state, [20, 21, 22, 23, 24], 5) == [20, 21, 22, END, 23]
    assert not state.is_open and state.forced() is None


def test_a_closed_prompt_waits_for_a_start_marker_in_the_output() -> None:
    # The prompt's thinking is closed (a start, then an end): nothing is forced until the
    # output opens a section; then the budget counts from its start marker.
    state = ThinkingState(spec(2), [START, 5, END, 6])
    assert not state.is_open
    out = drive(state, [30, 31, START, 32, 33, 34, 35], 8)
    assert out == [30, 31, START, 32, 33, END, 34, 35]


def test_a_natural_end_closes_the_section_and_a_new_one_gets_the_whole_budget() -> None:
    state = ThinkingState(spec(3), [START])
    out = drive(state, [40, END, 41, START, 42, 43, 44, 45], 9)
    assert out == [40, END, 41, START, 42, 43, 44, END, 45]


def test_a_budget_of_zero_forces_at_once() -> None:
    assert drive(ThinkingState(spec(0), [9, START]), [50, 51], 2) == [END, 50]
    assert drive(ThinkingState(spec(0), [9]), [START, 50], 3) == [START, END, 50]


def test_the_first_end_marker_is_forced_whole_and_any_end_marker_closes() -> None:
    state = ThinkingState(spec(1, end=[END2, [END]]), [START])
    assert drive(state, [60, 61, 62], 4) == [60, *END2, 61]
    assert not state.is_open
    # The other end marker closes a section too (no forcing after it).
    state = ThinkingState(spec(5, end=[END2, [END]]), [START])
    assert drive(state, [60, END, 61, 62, 63, 64, 65, 66], 8) == [60, END, 61, 62, 63, 64,
                                                                   65, 66]


def test_multi_token_start_markers_and_the_prompts_last_marker() -> None:
    starts = [[7, 8], [START]]
    # The later of the two start markers in the prompt counts: "7 8 5 <think> 3" holds 1.
    state = ThinkingState(spec(2, start=starts), [7, 8, 5, START, 3])
    assert state.is_open and state.count == 1
    # A two-token start marker opens a section in the output once complete.
    state = ThinkingState(spec(1, start=starts), [1])
    assert drive(state, [7, 8, 70, 71], 5) == [7, 8, 70, END, 71]
    # An end marker only counts after the start it closes (not overlapping it).
    state = ThinkingState(spec(9, start=[[5, 6]], end=[[6, 5]]), [])
    drive(state, [5, 6, 5], 3)
    assert state.is_open, "the '6 5' overlaps the start marker"


def test_the_engine_refuses_a_budget_it_cannot_honour() -> None:
    def error(**fields: Any) -> str | None:
        return budget_error(p.SamplingParams(max_tokens=4, **fields), vocab_size=200)

    assert error() is None
    assert error(thinking_budget=spec(3)) is None
    assert "out of range" in (error(thinking_budget=spec(-1)) or "")
    assert "structured_outputs" in (error(
        thinking_budget=spec(3), structured_outputs=p.StructuredOutputs(regex="a")) or "")
    assert "empty" in (error(thinking_budget=spec(3, end=[[]])) or "")
    assert "token id 200" in (error(thinking_budget=spec(3, start=[[200]])) or "")
    assert "at least one" in (error(thinking_budget=p.ThinkingBudget(3, [], [[END]])) or "")
