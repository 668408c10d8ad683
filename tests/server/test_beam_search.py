"""The beam search's steps and ranking (``server/output/beam_search.py``) on the shared
table ``tests/request_cases/beam_search.json``, which rust/server/src/output/beam_search/
tests.rs runs too: same candidates, same ties, same finished beams, bit for bit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine import protocol as p
from server.output.beam_search import Beam, Search, candidates, score
from server.validate.params import BeamSearch

pytestmark = pytest.mark.unit

TABLE = Path(__file__).resolve().parents[1] / "request_cases" / "beam_search.json"
CASES: list[dict[str, Any]] = json.loads(TABLE.read_text(encoding="utf-8"))["cases"]


def entry(model: dict[str, Any], tokens: list[int]) -> p.TokenLogprobs:
    """The model's next-token logprobs after ``tokens`` (its ``*`` entry for any other)."""
    found = model.get(",".join(map(str, tokens)), model["*"] if "*" in model else None)
    assert found is not None, f"the case's model has no entry for {tokens}"
    top = found["top"]
    return p.TokenLogprobs(found["token"], found["logprob"], 1, [t for t, _ in top],
                           [lp for _, lp in top])


def searched(case: dict[str, Any]) -> list[Beam]:
    search = Search(BeamSearch(case["width"], case["length_penalty"]),
                    frozenset(case["eos_token_ids"]), case["ignore_eos"])
    for _ in range(case["max_tokens"]):
        search.advance([entry(case["model"], beam.tokens) for beam in search.beams])
        if not search.beams:
            break
    return search.best()


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_table(case: dict[str, Any]) -> None:
    got = [{"tokens": b.tokens, "cum_logprob": b.cum_logprob, "steps": b.steps,
            "finish": b.finish} for b in searched(case)]
    assert got == case["beams"]


def test_the_table_has_its_cases() -> None:
    assert len(CASES) >= 9 and len({c["id"] for c in CASES}) == len(CASES)


def test_candidates_are_vllms_dict() -> None:
    got = candidates(p.TokenLogprobs(5, -0.9, 3, [6, 5, 7], [-0.2, -0.3, -1.0]))
    assert got == [(5, -0.3), (6, -0.2), (7, -1.0)]


def test_score_divides_by_the_length_to_the_penalty() -> None:
    assert score(Beam([4, 5], -3.0, 3), 1.0) == -1.0
    assert score(Beam([4, 5], -3.0, 3), 0.0) == -3.0
    assert score(Beam([], -2.0, 0), 2.0) == -2.0  # a beam of no token counts as 1
