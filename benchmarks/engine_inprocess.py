"""The engine in this process: a ``ModelEngine`` stepped by hand (every request added at
t = 0, ``step()`` until done; no server, no frontend). For quick A/B runs of engine
changes and for greedy parity with transformers."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine_hf import summarize

from engine import protocol as p
from engine.config import EngineConfig
from engine.runtime.engine import ModelEngine


def make_engine(model_dir: Path, dtype: str, device: str, num_requests: int,
                max_len: int) -> ModelEngine:
    return ModelEngine.from_config(EngineConfig(
        model=str(model_dir), device=device, dtype=dtype, max_num_seqs=max(num_requests, 1),
        max_num_batched_tokens=2048, max_model_len=max_len,
    ))


def run_engine(engine: ModelEngine, prompts: list[list[int]], output_len: int) -> dict[str, Any]:
    """Greedy, EOS ignored; the result has ``tokens`` besides the summary. The prefix
    cache is emptied first (every run starts cold)."""
    params = p.SamplingParams(max_tokens=output_len, temperature=0.0, ignore_eos=True)
    engine.add_request(p.EngineCoreRequest("warmup", prompts[0][:8], params, 0.0))
    while engine.has_unfinished_requests():
        engine.step()
    engine.kv_cache.reset_prefix_cache()
    outputs: dict[str, list[int]] = {str(i): [] for i in range(len(prompts))}
    first: dict[str, float] = {}
    start = time.perf_counter()
    for i, prompt in enumerate(prompts):
        engine.add_request(p.EngineCoreRequest(str(i), prompt, params, time.time()))
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.new_token_ids:
                first.setdefault(out.request_id, time.perf_counter())
                outputs[out.request_id].extend(out.new_token_ids)
    elapsed = time.perf_counter() - start
    ordered = [outputs[str(i)] for i in range(len(prompts))]
    ttfts = [first[str(i)] - start for i in range(len(prompts))]
    return {**summarize(elapsed, ttfts, ordered), "tokens": ordered,
            "dtype": str(engine.model.dtype).removeprefix("torch.")}
