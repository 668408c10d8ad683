"""Data parallel: the Rust frontend in front of 1, 2 and 4 mock engines, same client.

Starts ``vrs serve --mock --data-parallel-size N`` for each N, then drives it with ``vrs
bench serve`` (random dataset, input 512 / output 128 tokens, EOS ignored) at one
concurrency, the sizes taking turns (1 2 4 1 2 4 ...) for ``--rounds`` rounds. Reports the
median over rounds of req/s, output tok/s and TTFT p50/p99 as a markdown table and JSON.
The mock engine makes tokens instantly, so the frontend, not the engines, should be the
limit: throughput should stay flat as engines are added.

    python benchmarks/data_parallel.py                    # N = 1, 2, 4 at c = 512, 3 rounds
    python benchmarks/data_parallel.py --sizes 1 2 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_overhead import machine  # noqa: E402
from servers import REPO_ROOT, RESULTS, Server, vrs  # noqa: E402

METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms")


def bench(url: str, size: int, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    cmd = vrs("bench", "serve", "--base-url", url, "--num-prompts", str(args.prompts),
              "--max-concurrency", str(args.concurrency), "--random-input-len", "512",
              "--random-output-len", "128", "--ignore-eos", "--warmup-requests", "64",
              "--seed", "0", "--metric-percentiles", "50,99", "--result-file", str(out),
              "--label", f"dp{size}")
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    if done.returncode != 0:
        raise RuntimeError(f"bench failed (N={size}): {done.stderr.strip()[-2000:]}")
    return json.loads(out.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--concurrency", type=int, default=512)
    parser.add_argument("--prompts", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vrs-dp-bench-"))
    runs: dict[int, list[dict[str, Any]]] = {size: [] for size in args.sizes}
    for round_ in range(args.rounds):
        for size in args.sizes:
            # --max-num-seqs: room for every request in one mock engine (it queues the
            # rest, as a real engine does), so that the frontend is what is measured.
            server = Server(("serve", "--mock", "--data-parallel-size", str(size),
                             "--max-num-seqs", str(max(256, args.concurrency)),
                             "--log-level", "warning"), work / f"serve-dp{size}.log",
                            "vrs serve")
            try:
                runs[size].append(bench(server.url, size, args,
                                        work / f"dp{size}-r{round_}.json"))
            finally:
                server.stop()
    rows = [{"engines": size, "failed": sum(r.get("failed", 0) for r in results),
             **{m: statistics.median(r[m] for r in results) for m in METRICS}}
            for size, results in runs.items()]
    lines = ["| engines | req/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | failed |",
             "|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['engines']} | {r['request_throughput']:.1f} | {r['output_throughput']:.0f}"
              f" | {r['median_ttft_ms']:.1f} | {r['p99_ttft_ms']:.1f} | {r['failed']} |"
              for r in rows]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "data_parallel.json").write_text(json.dumps(
        {"machine": machine(), "args": vars(args), "rows": rows}, indent=2) + "\n")
    (RESULTS / "data_parallel.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
