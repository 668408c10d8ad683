"""Frontend overhead: the Rust frontend against the Python one, same mock engine, same client.

Starts ``vrs serve --mock`` (Rust frontend) and ``vrs serve --mock --frontend python`` (the
uvicorn baseline) on loopback, then drives each with ``vrs bench serve`` (the vrs-rs load
generator): random dataset, input 512 / output 128 tokens (EOS ignored), at each
concurrency, the two frontends taking turns (A B A B ...) for ``--rounds`` rounds. Reports
the median over rounds of req/s, output tok/s, TTFT p50/p99 and TPOT p50 and the
Rust/Python ratios, as a markdown table and JSON. ``--perf`` also records where the Rust
frontend spends its CPU during one extra run at the highest concurrency (``perf``).

    python benchmarks/frontend_overhead.py                      # 3 rounds, c = 1, 64, 512
    python benchmarks/frontend_overhead.py --rounds 5 --perf --latency-parts

Needs vrs-rs (``pip install .``, or VRS_RUST_FRONTEND_PATH pointing at a build); nothing
is downloaded (the built-in demo model's tokenizer, random weights never loaded).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import REPO_ROOT, RESULTS, Server, vrs  # noqa: E402

FRONTENDS = ("rust", "python")
METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
           "median_tpot_ms")


class FrontendServer(Server):
    """`vrs serve --mock [--frontend python]`."""

    def __init__(self, frontend: str, log_dir: Path) -> None:
        self.frontend = frontend
        # The mock runs at most --max-num-seqs at once (as a real engine): room for c = 512,
        # so that the frontend, not the engine's queue, is what is measured.
        super().__init__(("serve", "--mock", "--frontend", frontend, "--max-num-seqs", "1024",
                          "--log-level", "warning"),
                         log_dir / f"{frontend}.log", f"{frontend} frontend")


def bench(server: FrontendServer, concurrency: int, args: argparse.Namespace, out: Path) -> dict:
    prompts = max(args.min_prompts, args.prompts_per_slot * concurrency)
    cmd = vrs("bench", "serve", "--base-url", server.url, "--num-prompts", str(prompts),
              "--max-concurrency", str(concurrency), "--random-input-len", str(args.input_len),
              "--random-output-len", str(args.output_len), "--ignore-eos",
              "--warmup-requests", str(min(concurrency, 64)), "--seed", str(args.seed),
              "--metric-percentiles", "50,99", "--result-file", str(out),
              "--label", f"{server.frontend}-c{concurrency}")
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    if done.returncode != 0:
        raise RuntimeError(f"bench failed ({server.frontend}, c={concurrency}): "
                           f"{done.stderr.strip() or done.stdout[-2000:]}")
    return json.loads(out.read_text())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *descendants(kid)]
    return found


def profile(server: FrontendServer, concurrency: int, args: argparse.Namespace,
            work: Path) -> dict[str, Any]:
    """During one bench run: CPU seconds of the frontend and of its engine, and perf's top
    symbols of the Rust frontend (vrs-rs) by self time."""
    data = work / "perf.data"
    engines = descendants(server.proc.pid)
    before = (cpu_seconds(server.proc.pid), sum(cpu_seconds(p) for p in engines))
    perf = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-o", str(data),
                             "-p", str(server.proc.pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        result = bench(server, concurrency, args, work / "perf-run.json")
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
    return {"concurrency": concurrency, "duration_s": result["duration"],
            "request_throughput": result["request_throughput"],
            "frontend_cpu_s": frontend_cpu, "engine_cpu_s": engine_cpu,
            "top_symbols": rows[:30]}


def latency_parts(servers: dict[str, FrontendServer], args: argparse.Namespace,
                  work: Path) -> list[dict[str, Any]]:
    """E2EL p50 at concurrency 1 for 8 / all prompt tokens x 1 / all output tokens."""
    shapes = [(8, 1), (8, args.output_len), (args.input_len, 1),
              (args.input_len, args.output_len)]
    samples: dict[tuple[str, int, int], list[float]] = {}
    for _ in range(args.rounds):
        for input_len, output_len in shapes:
            for frontend in FRONTENDS:
                shape = argparse.Namespace(**{**vars(args), "input_len": input_len,
                                              "output_len": output_len, "min_prompts": 500})
                result = bench(servers[frontend], 1, shape, work / f"parts-{frontend}.json")
                samples.setdefault((frontend, input_len, output_len), []).append(
                    result["median_e2el_ms"])
    return [{"frontend": frontend, "input_len": i, "output_len": o,
             "median_e2el_ms": statistics.median(values)}
            for (frontend, i, o), values in samples.items()]


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                            capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "commit": commit or None}


def summarize(runs: list[dict[str, Any]], concurrencies: list[int]) -> list[dict[str, Any]]:
    rows = []
    for c in concurrencies:
        row: dict[str, Any] = {"concurrency": c}
        for frontend in FRONTENDS:
            cell = [r for r in runs if r["frontend"] == frontend and r["concurrency"] == c]
            for metric in METRICS:
                row[f"{frontend}_{metric}"] = statistics.median(r[metric] for r in cell)
            row[f"{frontend}_failed"] = sum(r["failed"] for r in cell)
        for metric in ("request_throughput", "output_throughput"):
            python = row[f"python_{metric}"]
            row[f"ratio_{metric}"] = row[f"rust_{metric}"] / python if python else None
        rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ("| concurrency | frontend | req/s | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) "
            "| TPOT p50 (ms) | failed |\n|---:|---|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for row in rows:
        c = row["concurrency"]
        for frontend in FRONTENDS:
            lines.append(
                f"| {c} | {frontend} | {row[f'{frontend}_request_throughput']:.1f} "
                f"| {row[f'{frontend}_output_throughput']:.0f} "
                f"| {row[f'{frontend}_median_ttft_ms']:.2f} | {row[f'{frontend}_p99_ttft_ms']:.2f} "
                f"| {row[f'{frontend}_median_tpot_ms']:.3f} | {row[f'{frontend}_failed']} |")
        ratio = row["ratio_request_throughput"]
        lines.append(f"| {c} | **Rust / Python** | **{ratio:.1f}×** "
                     f"| **{row['ratio_output_throughput']:.1f}×** | | | | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--concurrency", default="1,64,512",
                        help="comma-separated concurrency levels")
    parser.add_argument("--rounds", type=int, default=3, help="A B rounds per concurrency")
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--min-prompts", type=int, default=200,
                        help="requests per run at least")
    parser.add_argument("--prompts-per-slot", type=int, default=8,
                        help="requests per run = max(min-prompts, this x concurrency)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--perf", action="store_true",
                        help="profile the Rust frontend at the highest concurrency")
    parser.add_argument("--latency-parts", action="store_true",
                        help="split the latency of one request at concurrency 1")
    parser.add_argument("--output", type=Path, default=RESULTS / "frontend_overhead.json")
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    work = Path(tempfile.mkdtemp(prefix="vrs-frontend-overhead-"))
    servers = {}
    try:
        for frontend in FRONTENDS:
            servers[frontend] = FrontendServer(frontend, work)
        runs = []
        for rnd in range(args.rounds):
            for c in concurrencies:
                for frontend in FRONTENDS:  # A B, A B, ...
                    result = bench(servers[frontend], c, args, work / f"{frontend}-{c}.json")
                    runs.append({"round": rnd, "frontend": frontend, "concurrency": c,
                                 **{k: result[k] for k in (*METRICS, "failed", "completed",
                                                           "duration")}})
                    print(f"round {rnd + 1}/{args.rounds} c={c:<4} {frontend:<6} "
                          f"{result['request_throughput']:8.1f} req/s  "
                          f"failed {result['failed']}", file=sys.stderr, flush=True)
        perf_summary = (profile(servers["rust"], max(concurrencies), args, work)
                        if args.perf else None)
        parts = latency_parts(servers, args, work) if args.latency_parts else None
    finally:
        for server in servers.values():
            server.stop()
    rows = summarize(runs, concurrencies)
    table = markdown(rows)
    command = " ".join(["python", "benchmarks/frontend_overhead.py", *sys.argv[1:]])
    report = {"machine": machine(), "command": command, "settings": vars(args) | {
        "output": str(args.output)}, "summary": rows, "runs": runs, "perf": perf_summary,
        "latency_parts": parts}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(table + "\n")
    print(table)
    if perf_summary:
        print(f"\nRust frontend at c={perf_summary['concurrency']}: "
              f"{perf_summary['request_throughput']:.1f} req/s over "
              f"{perf_summary['duration_s']:.1f} s; CPU s: frontend "
              f"{perf_summary['frontend_cpu_s']:.1f}, engine {perf_summary['engine_cpu_s']:.1f}")
        print("perf, self time:\n" + "\n".join(perf_summary["top_symbols"]))
    if parts:
        print("\nconcurrency 1, E2EL p50 (ms):")
        for part in parts:
            print(f"  {part['frontend']:<6} input {part['input_len']:>4} output "
                  f"{part['output_len']:>4}: {part['median_e2el_ms']:.3f}")
    failed = sum(r["failed"] for r in runs)
    if failed:
        print(f"\n{failed} requests failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
