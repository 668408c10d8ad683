"""Tensor parallel served: `vrs serve --tensor-parallel-size N` for each N of ``--sizes``,
taking turns round by round, on one model and one load.

The model (``--shape``, default bench13m; ``--family``) is built with random seeded
weights and a tokenizer (engine_models.py). Each contender is a `vrs serve` (engine_serve.py:
warmed up, then ``vrs bench serve`` with ``--num-requests`` random prompts of
``--input-len`` tokens, ``--output-len`` out, ``--concurrency`` at once, greedy, EOS
ignored). Per contender: the median over rounds of output tok/s and TTFT p50, and per
rank what GET /load reports (weights and KV cache) and the rank process's resident
memory (VmRSS) after the last round. On the CPU the ranks share the cores (each gets
cores / N torch threads), so on a small machine TP is expected to be slower: it exists
for models that do not fit one device, and for GPUs (benchmarks/gpu.sh).

    python benchmarks/tensor_parallel.py                      # bench13m, TP 1 and 2, 3 rounds
    python benchmarks/tensor_parallel.py --device cuda --shape qwen3-0.6b --sizes 1,2

Markdown and JSON go to benchmarks/results/tensor_parallel.{md,json}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_models import FAMILIES, SHAPES, build_model  # noqa: E402
from engine_serve import ServedEngine  # noqa: E402
from frontend_overhead import machine  # noqa: E402
from servers import RESULTS  # noqa: E402

MIB = 2**20


def rank_rss(served: ServedEngine) -> list[int]:
    """VmRSS (bytes) of the engine (rank 0) and its workers, in rank order."""
    ranks: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
            status = (entry / "status").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[3]) != served.server.proc.pid:
            continue
        rss = next(int(line.split()[1]) * 1024 for line in status.splitlines()
                   if line.startswith("VmRSS:"))
        if cmd[1:3] == [b"-m", b"engine"]:
            ranks[0] = rss
        elif cmd[1:3] == [b"-m", b"engine.runtime.parallel.worker"]:
            ranks[int(cmd[cmd.index(b"--rank") + 1])] = rss
    return [ranks[r] for r in sorted(ranks)]


def markdown(report: dict[str, Any]) -> str:
    a = report["settings"]
    lines = [f"{report['model']}; {a['num_requests']} requests, {a['input_len']} in / "
             f"{a['output_len']} out, concurrency {a['concurrency']}, greedy, EOS ignored; "
             f"{a['device']} ({report['cpu']}); median of {a['rounds']} rounds, taking turns",
             "", "| TP | dtype | output tok/s | vs TP=1 | TTFT p50 (ms) | rank | weights (MiB) "
             "| KV cache (MiB) | RSS (MiB) | rounds (tok/s) |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    base = report["rows"][0]["output_tokens_per_s"]
    for row in report["rows"]:
        for rank in row["ranks"]:
            first = rank["rank"] == 0
            lines.append(
                (f"| {row['tp']} | {row['dtype']} | {row['output_tokens_per_s']:.0f} | "
                 f"{row['output_tokens_per_s'] / base:.2f}x | {row['ttft_p50_ms']:.0f} | "
                 if first else "| | | | | | ")
                + f"{rank['rank']} | {rank['weight_bytes'] / MIB:.1f} | "
                f"{rank['kv_cache_bytes'] / MIB:.1f} | {rank['rss_bytes'] / MIB:.0f} | "
                + (", ".join(map(str, row["rounds_tokens_per_s"])) if first else "") + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="bench13m", choices=sorted(SHAPES))
    parser.add_argument("--family", default="qwen3", choices=FAMILIES)
    parser.add_argument("--sizes", default="1,2", help="tensor-parallel sizes, taking turns")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--serve-dtype", default="auto",
                        choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "tensor_parallel.json")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vrs-tensor-parallel-"))
    model_dir = build_model(work, args.shape, args.seed, args.family)
    sizes = [int(s) for s in args.sizes.split(",")]
    served: dict[int, ServedEngine] = {}
    trials: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
    try:
        for n in sizes:
            print(f"starting TP={n} ...", file=sys.stderr, flush=True)
            served[n] = ServedEngine(model_dir, work, args, tensor_parallel_size=n)
        for r in range(args.rounds):
            for i in range(len(sizes)):
                n = sizes[(r + i) % len(sizes)]
                result = served[n].run(r)
                trials[n].append(result)
                print(f"round {r + 1}/{args.rounds} TP={n}: "
                      f"{result['output_tokens_per_s']:.0f} tok/s", file=sys.stderr, flush=True)
        rows = []
        for n in sizes:
            load = httpx.get(f"{served[n].server.url}/load", timeout=10).json()
            ranks = load["engines"][0]["ranks"]
            for rank, rss in zip(ranks, rank_rss(served[n]), strict=True):
                rank["rss_bytes"] = rss
            runs = trials[n]
            rows.append({"tp": n, "dtype": runs[0]["dtype"], "ranks": ranks,
                         "output_tokens_per_s": statistics.median(
                             t["output_tokens_per_s"] for t in runs),
                         "ttft_p50_ms": statistics.median(t["ttft_p50_ms"] for t in runs),
                         "rounds_tokens_per_s": [round(t["output_tokens_per_s"])
                                                 for t in runs]})
    finally:
        for engine in served.values():
            engine.stop()
    report = {"model": f"random {args.family} {args.shape}", **machine(),
              "command": "python benchmarks/tensor_parallel.py " + " ".join(sys.argv[1:]),
              "settings": vars(args) | {"output": str(args.output)}, "rows": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2))
    text = markdown(report)
    args.output.with_suffix(".md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
