"""The compiled decoder (engine/runtime/compile.py): the same tokens as eager, one compile.

These are the only engine tests that pay for torch.compile (tens of seconds on 2 cores);
every other test runs eager.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from engine import protocol as p
from engine.config import ConfigError, EngineConfig
from engine.runtime.compile import DecoderGraph, compile_choice
from tests.engine.engine_kit import make_engine, run_to_completion, tokens_of

pytestmark = pytest.mark.engine


def test_choice_follows_flags_dtype_and_device(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    config = EngineConfig(model="m")
    monkeypatch.setenv("VRS_COMPILE", "auto")
    assert not compile_choice(config, cpu, torch.bfloat16)[0]
    assert not compile_choice(config, cpu, torch.float32)[0]
    assert not compile_choice(config, cpu, torch.float16)[0]
    assert not compile_choice(config, cuda, torch.bfloat16)[0]
    eager = EngineConfig(model="m", enforce_eager=True)
    assert compile_choice(eager, cpu, torch.bfloat16) == (False, "--enforce-eager")
    monkeypatch.setenv("VRS_COMPILE", "on")
    assert compile_choice(config, cpu, torch.float32)[0]
    assert not compile_choice(eager, cpu, torch.float32)[0]
    monkeypatch.setenv("VRS_COMPILE", "off")
    assert not compile_choice(config, cpu, torch.bfloat16)[0]
    monkeypatch.setenv("VRS_COMPILE", "yes")
    with pytest.raises(ConfigError, match="VRS_COMPILE='yes'; allowed: auto, on, off"):
        compile_choice(config, cpu, torch.bfloat16)


def test_compiled_greedy_equals_eager(
    model_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """fp32 greedy through the compiled decoder: every token equal to the eager engine's,
    across prefill chunks, a prefix-cache hit and decode batches of changing size, with
    a single compile (T is dynamic) done at start-up."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("VRS_COMPILE", "on")
    model_dir = model_dirs["qwen3"]
    shared = list(range(3, 40))
    requests = [
        (f"r{i}", (shared if i % 2 else []) + [5 + i, 7 * i % 500 + 3] * (3 + 5 * i),
         p.SamplingParams(max_tokens=6 + 3 * i, temperature=0.0, ignore_eos=True))
        for i in range(5)
    ]
    eager = make_engine(model_dir, max_num_batched_tokens=48)
    expected = {rid: tokens_of(outs) for rid, outs in run_to_completion(eager, requests).items()}

    torch._dynamo.reset()
    counters.clear()
    with caplog.at_level(logging.INFO, logger="vrs.engine"):
        compiled = make_engine(model_dir, max_num_batched_tokens=48, enforce_eager=False)
    assert isinstance(compiled.runner.forward, DecoderGraph)
    assert "decoder compiled in" in caplog.text
    after_warm_up = counters["stats"]["unique_graphs"]
    assert after_warm_up >= 1
    got = {rid: tokens_of(outs) for rid, outs in run_to_completion(compiled, requests).items()}
    assert got == expected
    assert compiled.kv_cache.prefix_cache_hits > 0
    # Every batch size seen while serving reused the start-up graph.
    assert counters["stats"]["unique_graphs"] == after_warm_up


def test_enforce_eager_travels_in_the_engine_config(model_dirs: dict[str, Path]) -> None:
    """`vrs serve --enforce-eager` reaches EngineConfig through args-json's engine_config."""
    from rich.console import Console

    from cli.serve_args import ServeOptions, build_args

    params = {"model": str(model_dirs["llama"]), "model_option": None, "tokenizer": None,
              "host": "127.0.0.1", "port": 0, "served_model_name": None, "mock": False,
              "max_model_len": None, "log_level": "info", "shutdown_timeout": 1.0,
              "chat_template": None, "device": "cpu", "dtype": "float32", "block_size": 16,
              "max_num_seqs": 8, "max_num_batched_tokens": 256, "kv_cache_memory": None,
              "gpu_memory_utilization": 0.9, "enable_prefix_caching": True, "seed": 0,
              "mock_step_delay_ms": 0.0}
    for flag in (True, False):
        args = build_args(ServeOptions.from_params({**params, "enforce_eager": flag}),
                          Console(stderr=True))
        assert args["engine_config"]["enforce_eager"] is flag
