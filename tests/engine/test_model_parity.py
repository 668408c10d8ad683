"""The engine's forward and greedy decoding against transformers, per family (fp32)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import protocol as p
from engine.runtime.engine import ModelEngine
from engine.runtime.request import Request
from tests.engine.engine_kit import (
    hf_greedy,
    kv_bytes_per_block,
    make_engine,
    run_to_completion,
    tokens_of,
)

pytestmark = pytest.mark.engine

ATOL = 2e-4


def hf_logits(hf_model: Any, prompt: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return hf_model(torch.tensor([prompt])).logits[0].float()


def forward_rows(engine: ModelEngine, batch: list[tuple[Request, int]]) -> list[torch.Tensor]:
    """Run one step of ``batch`` through the runner; logits of every scheduled token."""
    for req, n in batch:
        assert engine.kv_cache.allocate_slots(req, n)
    with torch.inference_mode():
        inputs = engine.runner.prepare([r for r, _ in batch], [n for _, n in batch])
        hidden = engine.model.forward(
            inputs.input_ids, inputs.positions, inputs.meta, engine.runner.kv_caches
        )
        logits = engine.model.compute_logits(hidden)
    # The runner lays out single-token queries first, then the chunks.
    order = [i for i, (_, n) in enumerate(batch) if n == 1]
    order += [i for i, (_, n) in enumerate(batch) if n > 1]
    rows: dict[int, torch.Tensor] = {}
    offset = 0
    for i in order:
        n = batch[i][1]
        rows[i] = logits[offset:offset + n]
        offset += n
    for req, n in batch:
        req.num_computed_tokens += n
    return [rows[i] for i in range(len(batch))]


def new_request(rid: str, prompt: list[int]) -> Request:
    return Request(rid, prompt, p.SamplingParams(max_tokens=1), 0.0, frozenset())


def test_prefill_logits_match_transformers(
    family: str, model_dirs: dict[str, Path], hf_models: dict[str, Any]
) -> None:
    engine = make_engine(model_dirs[family], block_size=4)
    rng = random.Random(0)
    prompt = [rng.randrange(3, 512) for _ in range(37)]
    (ours,) = forward_rows(engine, [(new_request("a", prompt), len(prompt))])
    torch.testing.assert_close(ours, hf_logits(hf_models[family], prompt), atol=ATOL, rtol=0)


def test_chunked_prefill_and_decode_logits_match_transformers(
    family: str, model_dirs: dict[str, Path], hf_models: dict[str, Any]
) -> None:
    """Chunks after earlier context (bottom-right causal alignment), mixed with decodes."""
    engine = make_engine(model_dirs[family], block_size=4)
    hf = hf_models[family]
    rng = random.Random(1)
    a_prompt = [rng.randrange(3, 512) for _ in range(30)]
    b_prompt = [rng.randrange(3, 512) for _ in range(11)]
    a, b = new_request("a", a_prompt), new_request("b", b_prompt)
    a_ref, b_ref = hf_logits(hf, a_prompt), hf_logits(hf, b_prompt)
    # Step 1: a's first 5 tokens (not block aligned) and all of b but its last token.
    got_a, got_b = forward_rows(engine, [(a, 5), (b, 10)])
    torch.testing.assert_close(got_a, a_ref[:5], atol=ATOL, rtol=0)
    torch.testing.assert_close(got_b, b_ref[:10], atol=ATOL, rtol=0)
    # Step 2: b's last token as a single query next to a 14-token chunk of a.
    got_b, got_a = forward_rows(engine, [(b, 1), (a, 14)])
    torch.testing.assert_close(got_b, b_ref[10:11], atol=ATOL, rtol=0)
    torch.testing.assert_close(got_a, a_ref[5:19], atol=ATOL, rtol=0)
    # Step 3: a's rest alone, then a prefix-cache style restart of a from block 4.
    (got_a,) = forward_rows(engine, [(a, 11)])
    torch.testing.assert_close(got_a, a_ref[19:], atol=ATOL, rtol=0)
    again = new_request("again", a_prompt)
    again.block_ids = list(a.block_ids[:4])  # shares a's first 16 tokens' K/V
    again.num_computed_tokens = 16
    (got,) = forward_rows(engine, [(again, 14)])
    torch.testing.assert_close(got, a_ref[16:], atol=ATOL, rtol=0)


def pressure_workload(seed: int) -> list[tuple[str, list[int], p.SamplingParams]]:
    """Prompts of many lengths, some sharing long prefixes, one repeated exactly."""
    rng = random.Random(seed)
    shared = [rng.randrange(3, 512) for _ in range(24)]
    prompts = [[rng.randrange(3, 512) for _ in range(n)] for n in (3, 7, 12, 19, 26, 33, 41, 50)]
    prompts.append(shared + [rng.randrange(3, 512) for _ in range(5)])
    prompts.append(shared + [rng.randrange(3, 512) for _ in range(9)])
    prompts.append(list(prompts[5]))  # an exact repeat: a full hit recomputes one token
    prompts.append(shared[:16])  # exactly 4 blocks
    workload = []
    for i, prompt in enumerate(prompts):
        params = p.SamplingParams(max_tokens=8 + (i * 5) % 9, temperature=0.0, ignore_eos=True)
        workload.append((f"r{i}", prompt, params))
    return workload


def pressure_engine(model_dir: Path, **overrides: Any) -> ModelEngine:
    settings: dict[str, Any] = dict(
        block_size=4, max_num_batched_tokens=24, max_num_seqs=8,
        kv_cache_memory_bytes=kv_bytes_per_block(model_dir, 4) * 33,  # 32 blocks + scratch
    )
    settings.update(overrides)
    return make_engine(model_dir, **settings)


def test_greedy_matches_generate_under_pressure(
    family: str, model_dirs: dict[str, Path], hf_models: dict[str, Any]
) -> None:
    workload = pressure_workload(seed=7)
    engine = pressure_engine(model_dirs[family])
    assert engine.num_blocks == 32
    outputs = run_to_completion(engine, workload)
    for rid, prompt, params in workload:
        expected = hf_greedy(hf_models[family], prompt, params.max_tokens)
        assert tokens_of(outputs[rid]) == expected, rid
        assert outputs[rid][-1].finish_reason == "length"
    stats = engine.stats()
    assert max(len(prompt) for _, prompt, _ in workload) > 24  # chunked prefill happened
    assert stats.num_preemptions > 0
    assert stats.prefix_cache_hits > 0
    assert stats.num_free_blocks == stats.num_total_blocks == 32
    assert stats.num_running == stats.num_waiting == 0 and stats.kv_cache_usage == 0.0


def test_prefix_caching_on_equals_off(model_dirs: dict[str, Path]) -> None:
    workload = pressure_workload(seed=11)
    on = pressure_engine(model_dirs["qwen3"], enable_prefix_caching=True)
    off = pressure_engine(model_dirs["qwen3"], enable_prefix_caching=False)
    out_on, out_off = run_to_completion(on, workload), run_to_completion(off, workload)
    for rid, _, _ in workload:
        assert tokens_of(out_on[rid]) == tokens_of(out_off[rid]), rid
    assert on.stats().prefix_cache_hits > 0
    assert off.stats().prefix_cache_hits == 0
    # The exact repeat reports its cached prefix.
    assert any(outs[0].num_cached_tokens > 0 for outs in out_on.values())
