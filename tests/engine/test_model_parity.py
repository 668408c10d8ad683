"""The engine's forward and greedy decoding against transformers, per family (fp32)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.engine.engine_kit import (
    check_chunked_logits,
    forward_rows,
    hf_greedy,
    hf_logits,
    make_engine,
    new_request,
    pressure_engine,
    pressure_workload,
    run_to_completion,
    tokens_of,
)

pytestmark = pytest.mark.engine

ATOL = 2e-4


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
    check_chunked_logits(make_engine(model_dirs[family], block_size=4), hf_models[family], ATOL)


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
