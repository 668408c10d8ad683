"""Paged attention backends, A/B in one process: one layer's attention, then the engine.

Kernel rounds time one layer's attention (KV write + attention) on a random paged cache
whose block tables are scattered over the whole cache, as a running engine's are:

* ``sdpa (fresh gather)``: gather + SDPA with a new ``index_select`` result per call
  (the code before the gather buffer);
* ``sdpa``: gather + SDPA into the backend's reused buffer (the default off the CPU);
* ``resident``: resident K/V rows (attention/resident.py; the CPU's default), timed in
  steady state: the same batch every round, so each call appends one token per row and
  attends (its rows are filled by the untimed warm-up);
* ``flex``: compiled FlexAttention over the cache in place (``--flex``; each new padded
  batch size compiles first, outside the timed rounds; decode shapes only, as it runs
  chunks with the sdpa code).

Shapes: decode (64 single-token queries, contexts drawn from ``--ctx`` ranges) and a
chunked-prefill step (4 chunks of 256 tokens after 256 cached ones). The engine rounds
(``--engine``) run ModelEngine on a random Qwen3 with the bench13m shapes (hidden 512,
intermediate 1536, 4 layers, 8 / 4 heads, head_dim 64, vocab 8192): 64 requests of
128 in / 128 out, greedy, taking turns between the fresh gather, the reused gather and
resident rows.
Contenders take turns within each round; the table shows medians.

    python benchmarks/paged_attention.py --dtype float32 bfloat16 --flex --engine
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine import protocol as p  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.runtime.attention.base import AttentionBackend, StepBatch  # noqa: E402
from engine.runtime.attention.flex import FlexBackend  # noqa: E402
from engine.runtime.attention.resident import ResidentBackend  # noqa: E402
from engine.runtime.attention.sdpa import GatherBuffer, SdpaBackend  # noqa: E402
from engine.runtime.engine import ModelEngine  # noqa: E402

BLOCK, KV_HEADS, HEADS, DIM = 16, 4, 8, 64
CACHE_BLOCKS = 8191  # 1 GiB of fp32 cache over 4 layers, as the engine sizes it
CPU = torch.device("cpu")


class FreshGather(GatherBuffer):
    """The gather before the buffer: a new tensor per call."""

    def gather(
        self, cache: torch.Tensor, blocks: torch.Tensor, n: int, nb: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self.buffer = None
        return super().gather(cache, blocks, n, nb)


def fresh_sdpa() -> SdpaBackend:
    backend = SdpaBackend(CPU)
    backend.gather = FreshGather()
    return backend


def step_batch(shape: list[tuple[int, int]], seed: int) -> StepBatch:
    """``shape``: (cached tokens, new tokens) per request, single-token ones first."""
    rng = random.Random(seed)
    free = list(range(CACHE_BLOCKS))
    rng.shuffle(free)
    tables = [[free.pop() for _ in range(-(-(s + n) // BLOCK))] for s, n in shape]
    slots = [t[q // BLOCK] * BLOCK + q % BLOCK for (s, n), t in zip(shape, tables, strict=True)
             for q in range(s, s + n)]
    singles = [i for i, (_, n) in enumerate(shape) if n == 1]
    chunks = [i for i, (_, n) in enumerate(shape) if n > 1]
    return StepBatch(
        BLOCK, CACHE_BLOCKS, torch.tensor(slots), [shape[i][0] + 1 for i in singles],
        [tables[i] for i in singles], np.array([shape[i][0] for i in chunks], dtype=np.int64),
        np.array([shape[i][1] for i in chunks], dtype=np.int64), [tables[i] for i in chunks],
        [object() for _ in singles],  # new sequences: a backend's rows never carry over
    )


def kernel_rounds(
    backends: dict[str, AttentionBackend], dtype: torch.dtype, shape: list[tuple[int, int]],
    rounds: int,
) -> dict[str, float]:
    """Median ms of one step's metadata build plus one layer's forward, per backend."""
    batch = step_batch(shape, 0)
    gen = torch.Generator().manual_seed(0)
    cache = torch.randn(CACHE_BLOCKS + 1, BLOCK, 2, KV_HEADS, DIM, generator=gen).to(dtype)
    tokens = batch.slot_mapping.shape[0]
    q = torch.randn(tokens, HEADS, DIM, generator=gen).to(dtype)
    kv = torch.randn(tokens, 2, KV_HEADS, DIM, generator=gen).to(dtype)
    reference = None
    for name, backend in backends.items():  # warm-up (and flex's compile) untimed
        start = time.perf_counter()
        out = backend.build(batch).forward(0, q, kv, cache, DIM**-0.5).float()
        print(f"  warm-up {name}: {time.perf_counter() - start:.1f}s", flush=True)
        if reference is None:
            reference = out
        torch.testing.assert_close(out, reference, atol=2e-2, rtol=2e-2)
    times: dict[str, list[float]] = {name: [] for name in backends}
    for _ in range(rounds):
        for name, backend in backends.items():
            start = time.perf_counter()
            backend.build(batch).forward(0, q, kv, cache, DIM**-0.5)
            times[name].append(1000 * (time.perf_counter() - start))
    return {name: statistics.median(t) for name, t in times.items()}


def engine_rounds(dtype: str, rounds: int) -> dict[str, float]:
    """Median output tokens/s of ModelEngine with the fresh and the reused gather."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=8192, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
        num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=DIM,
        max_position_embeddings=1024, tie_word_embeddings=True, eos_token_id=2,
    )
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 8192) for _ in range(128)] for _ in range(64)]
    params = p.SamplingParams(max_tokens=128, temperature=0.0, ignore_eos=True)
    with tempfile.TemporaryDirectory() as tmp:
        Qwen3ForCausalLM(config).save_pretrained(tmp)
        engine = ModelEngine.from_config(EngineConfig(model=tmp, dtype=dtype))
    variants: dict[str, Callable[[], AttentionBackend]] = {
        "sdpa (fresh gather)": fresh_sdpa, "sdpa": lambda: SdpaBackend(CPU),
        "resident": lambda: ResidentBackend(CPU),
    }
    speeds: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(rounds + 1):
        for name, make in variants.items():
            engine.runner.attention = engine.attention = make()
            for i, prompt in enumerate(prompts):
                engine.add_request(p.EngineCoreRequest(f"{r}-{i}", prompt, params, 0.0))
            start, tokens = time.perf_counter(), 0
            while engine.has_unfinished_requests():
                tokens += sum(len(out.new_token_ids) for out in engine.step())
            if r:  # round 0 warms up
                speeds[name].append(tokens / (time.perf_counter() - start))
            engine.kv_cache.reset_prefix_cache()
    return {name: statistics.median(s) for name, s in speeds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", nargs="+", default=["float32"],
                        choices=["float32", "bfloat16"])
    parser.add_argument("--ctx", nargs="+", default=["128-512", "256-256"],
                        help="decode context ranges LO-HI")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--flex", action="store_true", help="also compiled FlexAttention")
    parser.add_argument("--engine", action="store_true", help="also the engine A/B")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = random.Random(1)
    shapes: dict[str, list[tuple[int, int]]] = {}
    for span in args.ctx:
        lo, hi = (int(x) for x in span.split("-"))
        shapes[f"decode 64 x ctx {span}"] = [(rng.randint(lo, hi) - 1, 1) for _ in range(64)]
    shapes["chunks 4 x 256 after 256"] = [(256, 256)] * 4
    print("| dtype | shape | backend | ms per layer | vs fresh |")
    print("|---|---|---|---:|---:|")
    for dtype_name in args.dtype:
        dtype = getattr(torch, dtype_name)
        backends: dict[str, AttentionBackend] = {
            "sdpa (fresh gather)": fresh_sdpa(), "sdpa": SdpaBackend(CPU),
            "resident": ResidentBackend(CPU),
        }
        if args.flex:
            backends["flex"] = FlexBackend(CPU, compiled=True)
        for label, shape in shapes.items():
            # flex runs chunks with the sdpa code: timing it there would only show noise.
            chosen = {k: v for k, v in backends.items() if k != "flex" or label.startswith("d")}
            ms = kernel_rounds(chosen, dtype, shape, args.rounds)
            base = ms["sdpa (fresh gather)"]
            for name, value in ms.items():
                print(f"| {dtype_name} | {label} | {name} | {value:.2f} | {base / value:.2f}x |",
                      flush=True)
    if args.engine:
        print("\n| dtype | engine attention | output tok/s | vs fresh |\n|---|---|---:|---:|")
        for dtype_name in args.dtype:
            speeds = engine_rounds(dtype_name, max(1, args.rounds // 3))
            base = speeds["sdpa (fresh gather)"]
            for name, value in speeds.items():
                print(f"| {dtype_name} | {name} | {value:.0f} | {value / base:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
