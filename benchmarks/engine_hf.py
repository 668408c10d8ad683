"""The transformers contender: static-batch ``generate()`` over every request at once
(greedy, EOS ignored, every request exactly ``output_len`` new tokens), in a dtype."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import torch

TORCH_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(elapsed: float, ttfts: list[float], outputs: list[list[int]]) -> dict[str, Any]:
    tokens = sum(len(o) for o in outputs)
    return {"elapsed_s": elapsed, "output_tokens": tokens, "requests": len(outputs),
            "output_tokens_per_s": tokens / elapsed,
            "ttft_p50_ms": 1e3 * statistics.median(ttfts),
            "ttft_p99_ms": 1e3 * percentile(ttfts, 99)}


class _FirstTokenClock:
    """A generate() streamer that notes when the first new tokens come out."""

    def __init__(self) -> None:
        self.calls = 0
        self.first: float | None = None

    def put(self, value: torch.Tensor) -> None:
        self.calls += 1
        if self.calls == 2 and self.first is None:  # call 1 is the prompt
            self.first = time.perf_counter()

    def end(self) -> None:
        pass


def load_hf(model_dir: Path, dtype: str, device: str) -> Any:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=TORCH_DTYPES[dtype])
    return model.to(device).eval()


def run_generate(model: Any, prompts: list[list[int]], output_len: int) -> dict[str, Any]:
    """One static-batch ``generate()`` over ``prompts`` (a short warm-up first); the
    result has ``tokens`` (each request's new ids) besides the summary."""
    from transformers import GenerationConfig

    device = next(model.parameters()).device

    def config(new: int) -> GenerationConfig:
        return GenerationConfig(max_new_tokens=new, min_new_tokens=new, do_sample=False,
                                eos_token_id=None, pad_token_id=0)

    ids = torch.tensor(prompts, device=device)
    with torch.inference_mode():
        model.generate(ids[:2, :8], attention_mask=torch.ones_like(ids[:2, :8]),
                       generation_config=config(4))
        clock = _FirstTokenClock()
        start = time.perf_counter()
        out = model.generate(ids, attention_mask=torch.ones_like(ids),
                             generation_config=config(output_len), streamer=clock)
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    outputs = out[:, ids.shape[1]:].tolist()
    ttft = (clock.first or start) - start
    return {**summarize(elapsed, [ttft] * len(prompts), outputs), "tokens": outputs}
