"""Where a decode step of the real engine goes: attention, matmuls, Python.

Builds the benchmark model (``--shape``, default bench13m, see engine_models.py), fills a
``ModelEngine`` with ``--seqs`` sequences of ``--context`` random prompt tokens (greedy,
EOS ignored), prefills them all, then, for each ``--dtypes`` entry:

1. times ``--steps`` decode steps without the profiler (the step time to quote);
2. runs ``--steps`` more under ``torch.profiler`` with labels around the step's parts
   (engine_labels.py): schedule, batch building, the forward's attention and matmuls
   (every linear, LM head included), the rest of the forward, sampling, the update.

Reports each part's share of the profiled step and, across the whole step, the share spent
inside torch ops against the time between them (Python, the dispatcher, the profiler's own
cost: the profiled step is slower than the plain one, both are printed). Attention is split
into its ops (the K/V gather, the kernel: SDPA or the resident rows' matmuls and
softmax, the K/V write, other) and its own Python. Ops the labels
miss (a compiled forward runs its inner functions only while tracing) are put in a part by
name: matmul-like names count as matmuls, attention-like names as attention.

    python benchmarks/engine_profile.py                          # bench13m, fp32 and bf16
    python benchmarks/engine_profile.py --dtypes float32 --threads 2 --steps 30

Writes JSON and a markdown table to benchmarks/results/engine_profile.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_labels import PARTS, install_labels, split_profile  # noqa: E402
from engine_models import SHAPES, build_model, describe, random_prompts  # noqa: E402
from servers import REPO_ROOT, RESULTS  # noqa: E402

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine import protocol as p  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.runtime.engine import ModelEngine  # noqa: E402


def decoding_engine(model_dir: Path, dtype: str, args: argparse.Namespace) -> ModelEngine:
    """An engine whose ``args.seqs`` sequences are past their prefill, all decoding."""
    total = args.context + 2 * args.steps + args.warmup + 8
    engine = ModelEngine.from_config(EngineConfig(
        model=str(model_dir), dtype=dtype, device="cpu", max_num_seqs=args.seqs,
        max_num_batched_tokens=2048, max_model_len=total,
    ))
    params = p.SamplingParams(max_tokens=total - args.context, temperature=0.0,
                              ignore_eos=True)
    vocab = engine.vocab_size
    for i, prompt in enumerate(random_prompts(args.seqs, args.context, vocab, args.seed)):
        engine.add_request(p.EngineCoreRequest(str(i), prompt, params, time.time()))
    started: set[str] = set()
    while len(started) < args.seqs:
        started.update(out.request_id for out in engine.step() if out.new_token_ids)
    for _ in range(args.warmup):
        engine.step()
    return engine


def profile_dtype(model_dir: Path, dtype: str, args: argparse.Namespace) -> dict[str, Any]:
    engine = decoding_engine(model_dir, dtype, args)
    plain = []
    for _ in range(args.steps):
        start = time.perf_counter()
        engine.step()
        plain.append(time.perf_counter() - start)
    hooks = install_labels(engine)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for _ in range(args.steps):
            engine.step()
        profiled = time.perf_counter() - start
    split = split_profile(prof.events(), profiled)
    return {
        "dtype": str(engine.model.dtype).removeprefix("torch."),
        "matmul_backend": engine.model.linear_backend,
        "step_ms": 1e3 * statistics.median(plain),
        "profiled_step_ms": 1e3 * profiled / args.steps,
        "labels": hooks,
        **split,
    }


def markdown(rows: list[dict[str, Any]], label: str, args: argparse.Namespace) -> str:
    lines = [
        f"{label}; {args.seqs} sequences decoding at context {args.context}, "
        f"{args.steps} steps, {torch.get_num_threads()} torch threads", "",
        "| dtype | step ms (plain / profiled) | " + " | ".join(PARTS) +
        " | in torch ops | between ops (Python) |",
        "|---|---:|" + "---:|" * (len(PARTS) + 2),
    ]
    for r in rows:
        shares = " | ".join(f"{100 * r['parts'][part]:.0f} %" for part in PARTS)
        lines.append(f"| {r['dtype']} ({r['matmul_backend']}) | {r['step_ms']:.1f} / "
                     f"{r['profiled_step_ms']:.1f} | {shares} | {100 * r['in_ops']:.0f} % | "
                     f"{100 * r['between_ops']:.0f} % |")
    lines += ["", "Attention, split (share of the step):", "",
              "| dtype | " + " | ".join(rows[0]["attention"]) + " |",
              "|---|" + "---:|" * len(rows[0]["attention"])]
    for r in rows:
        lines.append(f"| {r['dtype']} | " + " | ".join(
            f"{100 * v:.1f} %" for v in r["attention"].values()) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="bench13m", choices=sorted(SHAPES))
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help="comma-separated engine dtypes (auto, float32, bfloat16)")
    parser.add_argument("--seqs", type=int, default=64)
    parser.add_argument("--context", type=int, default=128, help="prompt tokens per sequence")
    parser.add_argument("--steps", type=int, default=20, help="decode steps timed and profiled")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (0: torch's default; 1 keeps the shares steady "
                             "on cores shared with other work)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "engine_profile.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model(Path(tmp), args.shape, args.seed)
        for dtype in dtypes:
            print(f"profiling {args.shape} in {dtype} ...", file=sys.stderr, flush=True)
            rows.append(profile_dtype(model_dir, dtype, args))
    table = markdown(rows, describe(SHAPES[args.shape]), args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    report = {"command": "python benchmarks/engine_profile.py " + " ".join(sys.argv[1:]),
              "torch": torch.__version__, "threads": torch.get_num_threads(),
              "settings": {k: str(v) for k, v in vars(args).items()}, "rows": rows}
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
