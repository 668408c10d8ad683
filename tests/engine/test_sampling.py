"""Sampling: the sampler on hand-made logits, and seeded sampling through the engine."""

from __future__ import annotations

import json
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import protocol as p
from engine.runtime.request import Request
from engine.runtime.sampler import Sampler
from engine.runtime.top_k_top_p import FIRST_WIDTH, top_k_top_p
from tests.engine.engine_kit import EOS_ID, make_engine, run_to_completion, tokens_of

pytestmark = pytest.mark.engine

VOCAB = 16


def req(
    prompt: list[int] | None = None, outputs: list[int] | None = None, **params: Any
) -> Request:
    params.setdefault("max_tokens", 100)
    r = Request("r", prompt or [0], p.SamplingParams(**params), 0.0, frozenset({EOS_ID}))
    r.token_ids.extend(outputs or [])
    return r


def logits_row(peak: int, second: int | None = None) -> torch.Tensor:
    row = torch.zeros(VOCAB)
    row[peak] = 5.0
    if second is not None:
        row[second] = 4.0
    return row


def draw(sampler: Sampler, row: torch.Tensor, request: Request, n: int) -> set[int]:
    logits = row.repeat(n, 1)
    return set(sampler(logits, [request] * n).token_ids)


def test_greedy_and_fast_path() -> None:
    sampler = Sampler(VOCAB, 0, torch.device("cpu"))
    logits = torch.stack([logits_row(3), logits_row(9)])
    out = sampler(logits, [req(temperature=0.0), req(temperature=0.0)])
    assert out.token_ids == [3, 9] and out.logprobs == [None, None]


def test_top_k_top_p_min_p_restrict_the_draw() -> None:
    sampler = Sampler(VOCAB, 0, torch.device("cpu"))
    flat = torch.zeros(VOCAB)
    flat[:4] = torch.tensor([3.0, 2.9, 2.8, 2.7])
    assert draw(sampler, flat, req(temperature=1.0, top_k=2), 400) == {0, 1}
    # top_p: tokens 0 and 1 hold ~0.37 of the mass together: top_p=0.3 keeps both.
    kept = draw(sampler, flat, req(temperature=1.0, top_p=0.3), 400)
    assert kept == {0, 1}
    assert draw(sampler, flat, req(temperature=1.0, min_p=0.95), 400) <= {0, 1}
    # No restriction: the long tail shows up.
    assert len(draw(sampler, flat, req(temperature=1.0), 400)) > 6


def test_penalties() -> None:
    sampler = Sampler(VOCAB, 0, torch.device("cpu"))
    row = logits_row(peak=5, second=6)[None]
    # Token 5 was generated: presence / frequency penalties push it below token 6.
    assert sampler(row, [req(temperature=0.0, outputs=[5], presence_penalty=1.5)]).token_ids == [6]
    assert sampler(row, [req(temperature=0.0, outputs=[5], frequency_penalty=1.5)]).token_ids == [6]
    assert sampler(row, [req(temperature=0.0, outputs=[6], presence_penalty=1.5)]).token_ids == [5]
    # Repetition penalty also covers the prompt: 5.0 / 1.5 < 4.0.
    assert sampler(row, [req(temperature=0.0, prompt=[5], repetition_penalty=1.5)]).token_ids == [6]
    assert sampler(row, [req(temperature=0.0, prompt=[5], repetition_penalty=1.1)]).token_ids == [5]


def test_min_tokens_masks_eos_and_stop_ids() -> None:
    sampler = Sampler(VOCAB, 0, torch.device("cpu"))
    row = logits_row(peak=EOS_ID, second=7)[None]
    assert sampler(row, [req(temperature=0.0, min_tokens=2)]).token_ids == [7]
    assert sampler(row, [req(temperature=0.0, min_tokens=2, outputs=[1, 1])]).token_ids == [EOS_ID]
    stop_row = logits_row(peak=9, second=7)[None]
    masked = req(temperature=0.0, min_tokens=1, stop_token_ids=[9])
    assert sampler(stop_row, [masked]).token_ids == [7]


def test_logprobs_are_raw_log_softmax_with_rank() -> None:
    sampler = Sampler(VOCAB, 0, torch.device("cpu"))
    row = torch.randn(VOCAB, generator=torch.Generator().manual_seed(3))
    expected = torch.log_softmax(row, dim=-1)
    out = sampler(row[None], [req(temperature=0.0, logprobs=3, presence_penalty=0.0)])
    (lp,) = out.logprobs
    assert lp is not None and lp.token_id == out.token_ids[0] == int(row.argmax())
    assert lp.rank == 1 and math.isclose(lp.logprob, float(expected.max()), rel_tol=1e-6)
    assert lp.top_token_ids == expected.topk(3).indices.tolist()
    # A sampled token that is not the best one reports its rank.
    low = int(row.argmin())
    forced = req(temperature=0.0, logprobs=0, min_tokens=1, stop_token_ids=[
        t for t in range(VOCAB) if t != low])
    (lp,) = sampler(row[None], [forced]).logprobs
    assert lp is not None and lp.token_id == low and lp.rank == VOCAB and lp.top_token_ids == []


# ---------------------------------------------------------------------- at vocabulary scale

BIG = 4096


def big_row(seed: int, scale: float = 2.0) -> torch.Tensor:
    return torch.randn(BIG, generator=torch.Generator().manual_seed(seed)) * scale


def counts(sampler: Sampler, row: torch.Tensor, request: Request, n: int) -> Counter[int]:
    return Counter(sampler(row.repeat(n, 1), [request] * n).token_ids)


def test_top_k_draws_the_k_best_at_their_renormalised_probabilities() -> None:
    sampler = Sampler(BIG, 0, torch.device("cpu"))
    row = big_row(1)
    best = row.topk(5)
    n = 3000
    seen = counts(sampler, row, req(temperature=1.0, top_k=5), n)
    assert set(seen) == set(best.indices.tolist())
    for token, prob in zip(best.indices.tolist(), torch.softmax(best.values, -1).tolist(),
                           strict=True):
        assert abs(seen[token] / n - prob) < 0.04, (token, seen[token] / n, prob)
    # With a temperature: the same support, flatter.
    hot = counts(sampler, row, req(temperature=3.0, top_k=5), n)
    assert set(hot) == set(best.indices.tolist())


def expected_top_p(row: torch.Tensor, top_p: float) -> set[int]:
    """The reference: a full sort, tokens whose better-ranked mass is below top_p."""
    probs, order = torch.softmax(row.double(), -1).sort(descending=True)
    keep = (probs.cumsum(-1) - probs) < top_p
    keep[0] = True
    return set(order[keep].tolist())


def test_top_p_alone_takes_as_many_candidates_as_its_mass_needs() -> None:
    peaked, flat = big_row(2, scale=4.0), big_row(3, scale=0.05)
    for row, top_p in ((peaked, 0.9), (flat, 0.5), (flat, 0.99)):
        found = top_k_top_p(row[None], [0], [top_p])
        kept = set(found.token_ids[0, : found.kept[0]].tolist())
        assert kept == expected_top_p(row, top_p)
        assert torch.isinf(found.logits[0, found.kept[0]:]).all()
    # The flat row at 0.5 needs far more than the first candidates taken.
    assert len(expected_top_p(flat, 0.5)) > FIRST_WIDTH
    sampler = Sampler(BIG, 0, torch.device("cpu"))
    seen = counts(sampler, flat, req(temperature=1.0, top_p=0.5), 400)
    assert set(seen) <= expected_top_p(flat, 0.5)
    assert any(int((flat > flat[t]).sum()) >= FIRST_WIDTH for t in seen)


def test_top_k_then_top_p_within_the_k() -> None:
    sampler = Sampler(VOCAB, 0, torch.device("cpu"))
    row = torch.zeros(VOCAB)
    row[:4] = torch.tensor([3.0, 2.9, 2.8, 2.7])
    # Within the top 2, token 0 holds 0.525 >= 0.5: top_p keeps it alone (over the whole
    # vocabulary it holds 0.19, and top_p would keep both).
    assert draw(sampler, row, req(temperature=1.0, top_k=2, top_p=0.5), 300) == {0}
    assert draw(sampler, row, req(temperature=1.0, top_k=2, top_p=0.6), 300) == {0, 1}


def test_mixed_batch_greedy_rows_take_the_argmax() -> None:
    sampler = Sampler(BIG, 0, torch.device("cpu"))
    rows = torch.stack([big_row(s) for s in range(6)])
    requests = [req(temperature=0.0), req(temperature=1.0, top_k=3),
                req(temperature=0.0), req(temperature=1.0, top_p=0.8),
                req(temperature=1.0), req(temperature=0.0, logprobs=2)]
    out = sampler(rows, requests)
    for i in (0, 2, 5):
        assert out.token_ids[i] == int(rows[i].argmax())
    assert out.token_ids[1] in rows[1].topk(3).indices.tolist()
    assert out.token_ids[3] in expected_top_p(rows[3], 0.8)


def test_seeded_top_k_row_ignores_the_batch_around_it() -> None:
    sampler = Sampler(BIG, 0, torch.device("cpu"))
    row, other = big_row(4, scale=0.5), big_row(5)

    def run(crowd: bool) -> list[int]:
        seeded = req(temperature=1.0, top_k=40, seed=7)
        tokens = []
        for _ in range(20):
            if crowd:  # a wider top-k and a top-p row widen the candidates of the batch
                out = sampler(torch.stack([other, row, other]),
                              [req(temperature=1.0, top_k=500), seeded,
                               req(temperature=1.0, top_p=0.9)])
                tokens.append(out.token_ids[1])
            else:
                tokens.append(sampler(row[None], [seeded]).token_ids[0])
        return tokens

    alone = run(crowd=False)
    assert run(crowd=True) == alone and len(set(alone)) > 1


def test_logprobs_of_rows_asking_different_counts() -> None:
    sampler = Sampler(BIG, 0, torch.device("cpu"))
    rows = torch.stack([big_row(s) for s in range(3)])
    out = sampler(rows, [req(temperature=0.0, logprobs=n) for n in (1, 4, 0)])
    for i, n in enumerate((1, 4, 0)):
        lp = out.logprobs[i]
        expected = torch.log_softmax(rows[i], -1).topk(max(n, 1))
        assert lp is not None and lp.rank == 1 and lp.token_id == out.token_ids[i]
        assert lp.top_token_ids == expected.indices.tolist()[:n]
        assert len(lp.top_logprobs) == n


# ---------------------------------------------------------------------- through the engine


def sampled(model_dir: Path, requests: list[tuple[str, list[int], p.SamplingParams]],
            **engine_overrides: Any) -> dict[str, list[int]]:
    engine = make_engine(model_dir, block_size=4, **engine_overrides)
    outputs = run_to_completion(engine, requests)
    stats = engine.stats()
    assert stats.num_free_blocks == stats.num_total_blocks
    return {rid: tokens_of(outs) for rid, outs in outputs.items()}


def test_seeded_sampling_is_reproducible_and_batch_independent(
    model_dirs: dict[str, Path],
) -> None:
    model_dir = model_dirs["llama"]
    prompt = list(range(10, 30))
    seeded = p.SamplingParams(max_tokens=24, temperature=1.0, top_p=0.95, seed=1234,
                              ignore_eos=True)
    alone = sampled(model_dir, [("s", prompt, seeded)])["s"]
    assert sampled(model_dir, [("s", prompt, seeded)])["s"] == alone
    # The same request amid others (seeded, unseeded, greedy, longer prompts, a tight
    # token budget that reshapes every batch): same tokens.
    crowd = [
        ("x", list(range(40, 90)), p.SamplingParams(max_tokens=30, temperature=0.8)),
        ("s", prompt, seeded),
        ("y", list(range(5, 12)), p.SamplingParams(max_tokens=10, temperature=1.0, seed=9)),
        ("g", list(range(60, 75)), p.SamplingParams(max_tokens=20, temperature=0.0)),
    ]
    together = sampled(model_dir, crowd, max_num_batched_tokens=16, max_num_seqs=3)
    assert together["s"] == alone
    other_seed = p.SamplingParams(max_tokens=24, temperature=1.0, top_p=0.95, seed=99,
                                  ignore_eos=True)
    assert sampled(model_dir, [("s", prompt, other_seed)])["s"] != alone


def test_stop_token_ids_and_eos(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    model_dir = model_dirs["qwen2"]
    prompt = list(range(100, 120))
    greedy = p.SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    free_run = sampled(model_dir, [("g", prompt, greedy)])["g"]
    stop_at = free_run[4]
    first = free_run.index(stop_at)
    stop = p.SamplingParams(max_tokens=12, temperature=0.0, stop_token_ids=[stop_at])
    engine = make_engine(model_dir, block_size=4)
    outs = run_to_completion(engine, [("s", prompt, stop)])["s"]
    assert tokens_of(outs) == free_run[:first + 1]
    assert outs[-1].finish_reason == "stop" and outs[-1].stop_token_id == stop_at
    # min_tokens past that point: the stop token is masked until then.
    late = p.SamplingParams(max_tokens=12, temperature=0.0, stop_token_ids=[stop_at],
                            min_tokens=first + 1)
    out = sampled(model_dir, [("m", prompt, late)])["m"]
    assert len(out) > first + 1 and out[first] != stop_at
    # EOS ids from generation_config.json (a list) end a request unless ignore_eos.
    eos_dir = tmp_path / "eos-model"
    shutil.copytree(model_dir, eos_dir)
    (eos_dir / "generation_config.json").write_text(json.dumps({"eos_token_id": [511, stop_at]}))
    eos_engine = make_engine(eos_dir, block_size=4)
    assert eos_engine.ready(0).eos_token_ids == [511, stop_at]
    outs = run_to_completion(eos_engine, [
        ("e", prompt, p.SamplingParams(max_tokens=12, temperature=0.0)),
        ("i", prompt, p.SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)),
    ])
    assert tokens_of(outs["e"]) == free_run[:first + 1]
    assert outs["e"][-1].finish_reason == "stop"
    assert tokens_of(outs["i"]) == free_run


def test_logprobs_through_the_engine(model_dirs: dict[str, Path]) -> None:
    engine = make_engine(model_dirs["qwen3"], block_size=4)
    params = p.SamplingParams(max_tokens=5, temperature=0.0, logprobs=4, ignore_eos=True)
    outs = run_to_completion(engine, [("l", list(range(50, 70)), params)])["l"]
    assert len(outs) == 5
    for out in outs:
        (lp,) = out.new_logprobs
        assert lp.token_id == out.new_token_ids[0] and lp.rank == 1
        assert lp.top_token_ids[0] == lp.token_id and len(lp.top_logprobs) == 4
        assert lp.top_logprobs == sorted(lp.top_logprobs, reverse=True) and lp.logprob <= 0.0
