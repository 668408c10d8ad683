"""ModelEngine as an EngineBackend: startup errors, refusals, aborts, failures, stats."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from engine import protocol as p
from engine.config import ConfigError
from engine.runtime.loader import ModelLoadError
from engine.runtime.models import UnsupportedArchitectureError
from tests.engine.engine_kit import (
    hf_greedy,
    kv_bytes_per_block,
    make_engine,
    run_to_completion,
    tokens_of,
)

pytestmark = pytest.mark.engine


def greedy(max_tokens: int, **extra: Any) -> p.SamplingParams:
    return p.SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **extra)


def test_ready_describes_the_engine(model_dirs: dict[str, Path]) -> None:
    engine = make_engine(model_dirs["qwen3"], served_model_name="tiny", max_model_len=256)
    ready = engine.ready(3)
    assert ready.engine_index == 3 and ready.model_name == "tiny" and not ready.is_mock
    assert ready.max_model_len == 256 and ready.vocab_size == 512 and ready.block_size == 16
    assert ready.eos_token_ids == [2] and ready.num_kv_blocks == engine.stats().num_total_blocks
    assert make_engine(model_dirs["llama"]).ready(0).model_name == "llama"


def test_unsupported_architecture_is_a_clear_error(
    model_dirs: dict[str, Path], tmp_path: Path
) -> None:
    bad = tmp_path / "foo"
    shutil.copytree(model_dirs["llama"], bad)
    config = json.loads((bad / "config.json").read_text())
    config["architectures"] = ["FooForCausalLM"]
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitectureError) as info:
        make_engine(bad)
    message = str(info.value)
    assert "FooForCausalLM" in message
    assert "transformers ships no causal LM named FooForCausalLM" in message
    for arch in ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"):
        assert arch in message


def test_a_causal_lm_named_model_generates_through_the_transformers_backend(
    model_dirs: dict[str, Path], tmp_path: Path
) -> None:
    """GPT2LMHeadModel ends in "Model" like a bare pooling checkpoint, but is a causal LM:
    it generates (its config here does not fit the class, so the backend refuses the
    checkpoint with that reason, not as a pooling model)."""
    bad = tmp_path / "gpt2ish"
    shutil.copytree(model_dirs["llama"], bad)
    config = json.loads((bad / "config.json").read_text())
    config["architectures"] = ["GPT2LMHeadModel"]
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="model_type 'llama' is not GPT2LMHeadModel's"):
        make_engine(bad)


def test_missing_model_and_bad_config(model_dirs: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="does not exist"):
        make_engine(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="max_model_len=4096"):
        make_engine(model_dirs["qwen2"], max_model_len=4096)  # the model allows 512
    with pytest.raises(ConfigError, match="kv_cache_memory_bytes"):
        make_engine(model_dirs["qwen2"], kv_cache_memory_bytes=100)
    tiny_cache = kv_bytes_per_block(model_dirs["qwen2"], 16) * 5  # 4 blocks = 64 tokens
    with pytest.raises(ConfigError, match="max_model_len=128; allowed: 1..64"):
        make_engine(model_dirs["qwen2"], max_model_len=128, kv_cache_memory_bytes=tiny_cache)
    # Unset max_model_len shrinks to what the cache holds instead.
    assert make_engine(model_dirs["qwen2"], kv_cache_memory_bytes=tiny_cache).max_model_len == 64


def test_impossible_requests_are_refused_with_numbers(model_dirs: dict[str, Path]) -> None:
    model_dir = model_dirs["llama"]
    engine = make_engine(
        model_dir, block_size=4, kv_cache_memory_bytes=kv_bytes_per_block(model_dir, 4) * 9
    )  # 8 blocks = 32 tokens, so max_model_len came down to 32
    assert engine.max_model_len == 32
    engine.max_model_len = 64  # lift it to reach the whole-cache check too
    cases = {
        "too-long": ([5] * 60, greedy(10), "prompt (60 tokens) + max_tokens (10) = 70 exceeds "
                     "max_model_len (64)"),
        "too-big": ([5] * 30, greedy(10), "needs 10 KV blocks of 4 tokens but the whole cache "
                    "has 8"),
        "bad-token": ([5, 512], greedy(3), "prompt token id 512 is out of range 0..511"),
        "empty": ([], greedy(3), "prompt is empty"),
        "bad-top-p": ([5], p.SamplingParams(max_tokens=3, top_p=0.0), "top_p=0.0"),
        "bad-min": ([5], p.SamplingParams(max_tokens=3, min_tokens=4), "min_tokens=4"),
    }
    for rid, (prompt, params, message) in cases.items():
        outs = engine.add_request(p.EngineCoreRequest(rid, prompt, params, 0.0))
        assert len(outs) == 1 and outs[0].finish_reason == "error", rid
        assert message in outs[0].error_message, (rid, outs[0].error_message)
    assert not engine.has_unfinished_requests()
    # The engine still serves; a duplicate id of a live request is refused.
    assert engine.add_request(p.EngineCoreRequest("ok", [5] * 10, greedy(4), 0.0)) == []
    dup = engine.add_request(p.EngineCoreRequest("ok", [5] * 10, greedy(4), 0.0))
    assert dup[0].finish_reason == "error" and "already in use" in dup[0].error_message
    while engine.has_unfinished_requests():
        engine.step()
    assert engine.stats().num_free_blocks == 8


def test_aborts_free_every_block(model_dirs: dict[str, Path]) -> None:
    model_dir = model_dirs["qwen3"]
    engine = make_engine(
        model_dir, block_size=4, max_num_seqs=3, max_num_batched_tokens=16,
        kv_cache_memory_bytes=kv_bytes_per_block(model_dir, 4) * 25,
    )
    prompts = {f"r{i}": [10 + i] * 5 + list(range(30, 30 + 3 * i)) for i in range(6)}
    for rid, prompt in prompts.items():
        assert engine.add_request(p.EngineCoreRequest(rid, prompt, greedy(20), 0.0)) == []
    finished: dict[str, list[Any]] = {}
    for _ in range(4):
        for out in engine.step():
            finished.setdefault(out.request_id, []).append(out)
    stats = engine.stats()
    assert stats.num_running == 3 and stats.num_waiting == 3 and stats.kv_cache_usage > 0
    aborted = engine.abort_requests(["r0", "r4", "nope"])  # one running, one waiting, unknown
    assert sorted(o.request_id for o in aborted) == ["r0", "r4"]
    assert all(o.finish_reason == "abort" and o.new_token_ids == [] for o in aborted)
    finished.pop("r0", None)
    while engine.has_unfinished_requests():
        for out in engine.step():
            finished.setdefault(out.request_id, []).append(out)
    assert set(finished) == {"r1", "r2", "r3", "r5"}
    assert all(len(tokens_of(v)) == 20 for v in finished.values())
    # Abort everything midway through a second wave as well.
    for rid, prompt in prompts.items():
        engine.add_request(p.EngineCoreRequest(rid, prompt, greedy(20), 0.0))
    for _ in range(3):
        engine.step()
    assert len(engine.abort_requests(list(prompts))) == 6
    stats = engine.stats()
    assert not engine.has_unfinished_requests()
    assert stats.num_free_blocks == stats.num_total_blocks == 24 and stats.kv_cache_usage == 0.0


def test_failing_request_ends_alone(
    model_dirs: dict[str, Path], hf_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forward that raises for one request's input fails that request only."""
    engine = make_engine(model_dirs["qwen2"], block_size=4)
    poison = 444
    forward = engine.model.forward

    def fragile_forward(input_ids: torch.Tensor, *args: Any) -> torch.Tensor:
        if bool((input_ids == poison).any()):
            raise RuntimeError("kernel failure on token 444")
        return forward(input_ids, *args)

    monkeypatch.setattr(engine.model, "forward", fragile_forward)
    good = {f"g{i}": list(range(20 + i, 40 + i)) for i in range(3)}
    workload = [(rid, prompt, greedy(6)) for rid, prompt in good.items()]
    workload.insert(1, ("bad", [7, 8, poison, 9], greedy(6)))
    outputs = run_to_completion(engine, workload)
    assert outputs["bad"][-1].finish_reason == "error"
    assert "kernel failure on token 444" in outputs["bad"][-1].error_message
    for rid, prompt in good.items():
        assert tokens_of(outputs[rid]) == hf_greedy(hf_models["qwen2"], prompt, 6)
    stats = engine.stats()
    assert stats.num_free_blocks == stats.num_total_blocks


def test_stats_and_utility(model_dirs: dict[str, Path]) -> None:
    engine = make_engine(model_dirs["llama"], block_size=4)
    prompt = list(range(40, 73))
    run_to_completion(engine, [("a", prompt, greedy(3))])
    outs = run_to_completion(engine, [("b", prompt, greedy(3))])
    assert outs["b"][0].num_cached_tokens == 32
    stats = engine.stats()
    assert stats.prefix_cache_queries == 66 and stats.prefix_cache_hits == 32
    assert engine.utility("ping", []) == "pong"
    assert engine.utility("get_stats", [])["prefix_cache_hits"] == 32
    assert engine.utility("get_model_info", [])["architecture"] == "LlamaForCausalLM"
    assert engine.utility("reset_prefix_cache", []) is True
    outs = run_to_completion(engine, [("c", prompt, greedy(3))])
    assert outs["c"][0].num_cached_tokens == 0
    with pytest.raises(ValueError, match="unknown utility method"):
        engine.utility("nope", [])


def test_matmul_row_buckets_are_few_and_cover() -> None:
    from engine.runtime.models.decoder import row_bucket

    buckets = {row_bucket(rows) for rows in range(1, 8193)}
    assert all(row_bucket(rows) >= rows for rows in range(1, 8193))
    assert len(buckets) <= 100  # oneDNN kernels are built per shape: keep shapes few
    assert row_bucket(1) == 1 and row_bucket(64) == 64 and row_bucket(2048) == 2048
