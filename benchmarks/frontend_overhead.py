"""Frontend overhead: the Rust frontend against the Python one, same mock engine, same client.

Starts ``vrs serve --mock`` (Rust frontend) and ``vrs serve --mock --frontend python`` (the
uvicorn baseline) on loopback, then drives each with ``vrs bench serve`` (the vrs-rs load
generator): random dataset, input 512 / output 128 tokens (EOS ignored), at each
concurrency, the frontends taking turns (A B A B ...) for ``--rounds`` rounds.

Flat out (the default) the mock makes steps as fast as it can and coalesces them, so this
measures the cost of a request: reports the median over rounds of req/s, output tok/s,
TTFT p50/p99 and TPOT p50 and the Rust/Python ratios. Paced (``--step-ms 2``) the mock
makes one token per request every 2 ms, every token its own message and SSE chunk, over
chat streams: reports req/s, TTFT and ITL p50/p99 and the frontend process's CPU per
request and per streamed token (see frontend_paced.py). Both write a markdown table and
JSON. ``--rust-binary LABEL=PATH`` (repeatable) measures those vrs-rs builds side by side
instead of the installed one (A/B of two builds in one run; ``--no-python`` leaves the
Python frontend out). ``--perf`` also records where the (first) Rust frontend spends its
CPU during one extra run (``perf``), at ``--perf-concurrency`` (default: the highest
concurrency flat out, 64 paced).

    python benchmarks/frontend_overhead.py                      # 3 rounds, c = 1, 64, 512
    python benchmarks/frontend_overhead.py --rounds 5 --perf --latency-parts
    python benchmarks/frontend_overhead.py --step-ms 2          # paced, c = 1, 64, 512
    python benchmarks/frontend_overhead.py --step-ms 2 --no-python \
        --rust-binary before=/tmp/vrs-rs-before --rust-binary after=target/release/vrs-rs

Needs vrs-rs (``pip install .``, or VRS_RUST_FRONTEND_PATH pointing at a build); nothing
is downloaded (the built-in demo model's tokenizer, random weights never loaded).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import frontend_paced as paced  # noqa: E402
from frontend_servers import (  # noqa: E402
    Frontend,
    FrontendServer,
    bench,
    cpu_seconds,
    descendants,
    frontends,
    machine,
)
from servers import RESULTS  # noqa: E402

METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
           "median_tpot_ms")


def profile(server: FrontendServer, concurrency: int, args: argparse.Namespace,
            work: Path) -> dict[str, Any]:
    """During one bench run (paced: chat streams): CPU seconds of the frontend and of its
    engine, and perf's top symbols of the Rust frontend (vrs-rs) by self time."""
    data = work / "perf.data"
    engines = descendants(server.proc.pid)
    before = (cpu_seconds(server.proc.pid), sum(cpu_seconds(p) for p in engines))
    perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", str(data),
                             "-p", str(server.proc.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        result = bench(server, concurrency, args, work / "perf-run.json",
                       paced.BACKEND if args.step_ms else None)
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait(60)
    frontend_cpu = cpu_seconds(server.proc.pid) - before[0]
    engine_cpu = sum(cpu_seconds(p) for p in engines) - before[1]
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--no-children", "--sort", "dso,symbol",
         "--percent-limit", "1", "-g", "none"], capture_output=True, text=True)
    rows = [line.rstrip(" -") for line in report.stdout.splitlines()
            if line.strip() and not line.startswith("#")]
    return {"frontend": server.frontend, "concurrency": concurrency,
            "duration_s": result["duration"],
            "request_throughput": result["request_throughput"],
            "frontend_cpu_s": frontend_cpu, "engine_cpu_s": engine_cpu,
            "frontend_requests": result["frontend_requests"], "top_symbols": rows[:30]}


def latency_parts(servers: dict[str, FrontendServer], args: argparse.Namespace,
                  work: Path) -> list[dict[str, Any]]:
    """E2EL p50 at concurrency 1 for 8 / all prompt tokens x 1 / all output tokens."""
    shapes = [(8, 1), (8, args.output_len), (args.input_len, 1),
              (args.input_len, args.output_len)]
    samples: dict[tuple[str, int, int], list[float]] = {}
    for _ in range(args.rounds):
        for input_len, output_len in shapes:
            for label, server in servers.items():
                shape = argparse.Namespace(**{**vars(args), "input_len": input_len,
                                              "output_len": output_len, "min_prompts": 500})
                result = bench(server, 1, shape, work / f"parts-{label}.json")
                samples.setdefault((label, input_len, output_len), []).append(
                    result["median_e2el_ms"])
    return [{"frontend": frontend, "input_len": i, "output_len": o,
             "median_e2el_ms": statistics.median(values)}
            for (frontend, i, o), values in samples.items()]


def flat_out(servers: dict[str, FrontendServer], concurrencies: list[int],
             args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    runs = []
    for rnd in range(args.rounds):
        for c in concurrencies:
            for label, server in servers.items():  # A B, A B, ...
                result = bench(server, c, args, work / f"{label}-{c}.json")
                runs.append({"round": rnd, "frontend": label, "concurrency": c,
                             **{k: result[k] for k in (*METRICS, "failed", "completed",
                                                       "duration")}})
                print(f"round {rnd + 1}/{args.rounds} c={c:<4} {label:<6} "
                      f"{result['request_throughput']:8.1f} req/s  "
                      f"failed {result['failed']}", file=sys.stderr, flush=True)
    return runs


def summarize(runs: list[dict[str, Any]], labels: list[str],
              concurrencies: list[int]) -> list[dict[str, Any]]:
    rows = []
    for c in concurrencies:
        row: dict[str, Any] = {"concurrency": c}
        for label in labels:
            cell = [r for r in runs if r["frontend"] == label and r["concurrency"] == c]
            for metric in METRICS:
                row[f"{label}_{metric}"] = statistics.median(r[metric] for r in cell)
            row[f"{label}_failed"] = sum(r["failed"] for r in cell)
        if "rust" in labels and "python" in labels:
            for metric in ("request_throughput", "output_throughput"):
                python = row[f"python_{metric}"]
                row[f"ratio_{metric}"] = row[f"rust_{metric}"] / python if python else None
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], labels: list[str]) -> str:
    head = ("| concurrency | frontend | req/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) "
            "| TPOT p50 (ms) | failed |\n|---:|---|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for row in rows:
        c = row["concurrency"]
        for label in labels:
            lines.append(
                f"| {c} | {label} | {row[f'{label}_request_throughput']:.1f} "
                f"| {row[f'{label}_output_throughput']:.0f} "
                f"| {row[f'{label}_median_ttft_ms']:.2f} | {row[f'{label}_p99_ttft_ms']:.2f} "
                f"| {row[f'{label}_median_tpot_ms']:.3f} | {row[f'{label}_failed']} |")
        ratio = row.get("ratio_request_throughput")
        if ratio is not None:
            lines.append(f"| {c} | **Rust / Python** | **{ratio:.1f}×** "
                         f"| **{row['ratio_output_throughput']:.1f}×** | | | | |")
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,64,512",
                        help="comma-separated concurrency levels")
    parser.add_argument("--rounds", type=int, default=3, help="A B rounds per concurrency")
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--step-ms", type=float, default=0.0,
                        help="pace the mock engine: one token per request per step of this "
                             "many ms (0: flat out)")
    parser.add_argument("--min-prompts", type=int, default=None,
                        help="requests per run at least (default 200 flat out, 16 paced)")
    parser.add_argument("--prompts-per-slot", type=int, default=None,
                        help="requests per run = max(min-prompts, this x concurrency) "
                             "(default 8 flat out, 4 paced)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rust-binary", action="append", default=[], metavar="LABEL=PATH",
                        help="a vrs-rs build to measure, named LABEL (repeatable; default: "
                             "the installed one, as 'rust')")
    parser.add_argument("--python-tree", action="append", default=[], metavar="LABEL=PATH",
                        help="also measure the Python frontend of another source tree (e.g. "
                             "a git worktree of an older commit), named LABEL (repeatable)")
    parser.add_argument("--no-python", action="store_true",
                        help="leave the Python frontend out")
    parser.add_argument("--perf", action="store_true",
                        help="profile the (first) Rust frontend during one extra run")
    parser.add_argument("--perf-concurrency", type=int, default=None,
                        help="the concurrency --perf profiles (default: the highest flat "
                             "out, 64 paced)")
    parser.add_argument("--latency-parts", action="store_true",
                        help="split the latency of one request at concurrency 1 (flat out)")
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON result (default benchmarks/results/frontend_overhead.json, "
                             "frontend_paced.json paced); the table goes beside it as .md")
    args = parser.parse_args()
    if args.step_ms < 0:
        parser.error("--step-ms must be >= 0")
    if args.step_ms and args.latency_parts:
        parser.error("--latency-parts measures the flat-out mode; drop --step-ms")
    if args.min_prompts is None:
        args.min_prompts = 16 if args.step_ms else 200
    if args.prompts_per_slot is None:
        args.prompts_per_slot = 4 if args.step_ms else 8
    if args.output is None:
        name = "frontend_paced.json" if args.step_ms else "frontend_overhead.json"
        args.output = RESULTS / name
    return args


def main() -> int:
    args = parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    chosen: list[Frontend] = frontends(args.rust_binary, not args.no_python,
                                         args.python_tree)
    labels = [f.label for f in chosen]
    rust = next((f.label for f in chosen if f.kind == "rust"), None)
    work = Path(tempfile.mkdtemp(prefix="vrs-frontend-overhead-"))
    servers: dict[str, FrontendServer] = {}
    try:
        for frontend in chosen:
            servers[frontend.label] = FrontendServer(frontend, work, args.step_ms)
        if args.step_ms:
            runs = paced.run(servers, concurrencies, args, work)
        else:
            runs = flat_out(servers, concurrencies, args, work)
        perf_at = args.perf_concurrency or (64 if args.step_ms else max(concurrencies))
        perf_summary = (profile(servers[rust], perf_at, args, work)
                        if args.perf and rust else None)
        parts = latency_parts(servers, args, work) if args.latency_parts else None
    finally:
        for server in servers.values():
            server.stop()
    if args.step_ms:
        rows = paced.summarize(runs, labels, concurrencies)
        table = paced.markdown(rows, args.step_ms)
    else:
        rows = summarize(runs, labels, concurrencies)
        table = markdown(rows, labels)
    command = " ".join(["python", "benchmarks/frontend_overhead.py", *sys.argv[1:]])
    report = {"machine": machine(), "command": command, "settings": vars(args) | {
        "output": str(args.output)}, "summary": rows, "runs": runs, "perf": perf_summary,
        "latency_parts": parts}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(table + "\n")
    print(table)
    if perf_summary:
        cpu_ms = perf_summary["frontend_cpu_s"] * 1e3 / perf_summary["frontend_requests"]
        print(f"\n{perf_summary['frontend']} frontend at c={perf_summary['concurrency']}: "
              f"{perf_summary['request_throughput']:.1f} req/s over "
              f"{perf_summary['duration_s']:.1f} s; CPU s: frontend "
              f"{perf_summary['frontend_cpu_s']:.1f} ({cpu_ms:.2f} ms/request), "
              f"engine {perf_summary['engine_cpu_s']:.1f}")
        print("perf, self time:\n" + "\n".join(perf_summary["top_symbols"]))
    if parts:
        print("\nconcurrency 1, E2EL p50 (ms):")
        for part in parts:
            print(f"  {part['frontend']:<6} input {part['input_len']:>4} output "
                  f"{part['output_len']:>4}: {part['median_e2el_ms']:.3f}")
    if args.step_ms:
        for merged in paced.merged_steps(rows):
            print(f"warning: steps merged, not one token per chunk: {merged}", file=sys.stderr)
    failed = sum(r["failed"] for r in runs)
    if failed:
        print(f"\n{failed} requests failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
