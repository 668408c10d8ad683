"""Beam search on a real model (the tiny random models, the real engine in-process): the
frontends' search (``server/output/beam_search.py``, its step requests as sent) fed by
``ModelEngine``. Width 1 is greedy decoding; a wider search's best sequence is at least as
likely as greedy's; a beam's cumulative logprob is what the model gives its tokens."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine import protocol as p
from engine.runtime.engine import ModelEngine
from server.output.beam_search import Beam, Search, step_params
from server.validate.params import BeamSearch
from tests.engine.engine_kit import make_engine, run_to_completion, tokens_of

pytestmark = pytest.mark.engine

PROMPT = [11, 57, 203, 9, 88, 140]
MAX_TOKENS = 6


def beam_search(engine: ModelEngine, width: int, length_penalty: float = 1.0) -> list[Beam]:
    """The search, each step's requests run on ``engine`` (EOS ignored: every beam runs
    ``MAX_TOKENS`` steps)."""
    search = Search(BeamSearch(width, length_penalty), frozenset(engine.eos_token_ids),
                    ignore_eos=True)
    for step in range(MAX_TOKENS):
        requests = [(f"s{step}-{i}", [*PROMPT, *beam.tokens], step_params(width, None))
                    for i, beam in enumerate(search.beams)]
        outputs = run_to_completion(engine, requests)
        entries = []
        for rid, _, _ in requests:
            (entry,) = [lp for out in outputs[rid] for lp in out.new_logprobs or ()]
            assert len(entry.top_token_ids) == 2 * width
            entries.append(entry)
        search.advance(entries)
    return search.best()


def greedy(engine: ModelEngine) -> tuple[list[int], float]:
    params = p.SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, logprobs=0,
                              ignore_eos=True)
    outputs = run_to_completion(engine, [("greedy", PROMPT, params)])["greedy"]
    return tokens_of(outputs), sum(lp.logprob for out in outputs
                                   for lp in out.new_logprobs or ())


def scored(engine: ModelEngine, tokens: list[int]) -> float:
    """The model's logprob of ``tokens`` after the prompt (the engine's prompt logprobs)."""
    params = p.SamplingParams(max_tokens=1, prompt_logprobs=0)
    outputs = run_to_completion(engine, [("score", [*PROMPT, *tokens], params)])["score"]
    entries = next(out.prompt_logprobs for out in outputs if out.prompt_logprobs)
    return sum(entry.logprob for entry in entries[len(PROMPT) - 1:])


@pytest.fixture
def engine(model_dirs: dict[str, Path], family: str) -> ModelEngine:
    return make_engine(model_dirs[family])


def test_width_one_is_greedy(engine: ModelEngine) -> None:
    tokens, cum = greedy(engine)
    (best,) = beam_search(engine, 1)
    assert best.tokens == tokens
    assert best.finish == "length" and best.steps == MAX_TOKENS
    assert math.isclose(best.cum_logprob, cum, abs_tol=1e-4)


@pytest.mark.parametrize("length_penalty", [1.0, 0.0])
def test_a_wider_beam_is_at_least_as_likely(engine: ModelEngine, length_penalty: float) -> None:
    _, greedy_cum = greedy(engine)
    beams = beam_search(engine, 4, length_penalty)
    assert len(beams) == 4
    assert len({tuple(b.tokens) for b in beams}) == 4, "distinct sequences"
    cums = [b.cum_logprob for b in beams]
    assert cums == sorted(cums, reverse=True), "equal lengths: ranked by logprob"
    assert cums[0] >= greedy_cum - 1e-4
    # Each beam's cumulative logprob is the model's for its tokens.
    for beam in beams:
        assert math.isclose(beam.cum_logprob, scored(engine, beam.tokens), abs_tol=1e-3)
