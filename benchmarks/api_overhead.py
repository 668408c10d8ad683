"""API overhead: the same load through /v1/chat/completions, /v1/responses and /v1/messages.

Starts ``vrs serve --mock`` (``--frontend rust``, the default, or ``python``) on loopback,
then drives it with ``vrs bench serve`` (the vrs-rs load generator) once per API and
round: ``--backend openai-chat``, ``openai-responses`` and ``anthropic-messages``, the
same random prompts (input 512 tokens, one user message), the same output length (128;
the mock engine never samples EOS, so every request makes exactly that many tokens: the
run checks it from the usage each API reports), greedy, streamed, at concurrency 64.
The APIs take turns (round r starts with the r-th API: A B C, B C A, C A B, ...) for
``--rounds`` rounds. Reports the median over rounds of req/s, output tok/s, TTFT p50/p99
and TPOT p50 per API, and each API's req/s over chat's (issue #16's target: within 10%),
as a markdown table and JSON (``benchmarks/results/api_overhead-<frontend>.{json,md}``).

    python benchmarks/api_overhead.py                          # rust, 3 rounds, c = 64
    python benchmarks/api_overhead.py --frontend python --rounds 5
    python benchmarks/api_overhead.py --apis chat --rounds 1 --prompts 128   # smoke run

Needs vrs-rs (``pip install .``, or VRS_RUST_FRONTEND_PATH pointing at a build); nothing
is downloaded (the built-in demo model's tokenizer, random weights never loaded).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_overhead import machine  # noqa: E402
from servers import RESULTS, Server, bench_serve  # noqa: E402

# API -> (vrs bench serve backend, route): the backend's default endpoint is the route.
APIS = {"chat": ("openai-chat", "/v1/chat/completions"),
        "responses": ("openai-responses", "/v1/responses"),
        "messages": ("anthropic-messages", "/v1/messages")}
METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
           "median_tpot_ms", "frontend_cpu_ms_per_request")
TARGET = 0.9  # each API's req/s at least this share of chat's (issue #16)


def bench(server: Server, api: str, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """One `vrs bench serve` run of ``api`` (checked as ``servers.bench_serve`` checks)."""
    backend, route = APIS[api]
    return bench_serve(server, backend, route, f"{args.frontend}-{api}", args, out)


def summarize(runs: list[dict[str, Any]], apis: list[str]) -> list[dict[str, Any]]:
    rows = []
    for api in apis:
        cell = [r for r in runs if r["api"] == api]
        row: dict[str, Any] = {"api": api, "route": APIS[api][1],
                               **{m: statistics.median(r[m] for r in cell) for m in METRICS},
                               "failed": sum(r["failed"] for r in cell)}
        rows.append(row)
    chat = next((r for r in rows if r["api"] == "chat"), None)
    for row in rows:
        row["ratio_to_chat"] = (row["request_throughput"] / chat["request_throughput"]
                                if chat else None)
        row["cpu_ratio_to_chat"] = (row["frontend_cpu_ms_per_request"]
                                    / chat["frontend_cpu_ms_per_request"] if chat else None)
    return rows


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"{args.frontend} frontend, mock engine: input {args.input_len} / output "
             f"{args.output_len} tokens, concurrency {args.concurrency}, {args.prompts} "
             f"requests a run, median of {args.rounds} rounds", "",
             "| API | route | req/s | / chat | frontend CPU ms/request | / chat | output tok/s "
             "| TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | failed |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        ratio = "" if r["ratio_to_chat"] is None else f"{r['ratio_to_chat']:.3f}"
        cpu = r["frontend_cpu_ms_per_request"]
        cpu_ratio = "" if r["cpu_ratio_to_chat"] is None else f"{r['cpu_ratio_to_chat']:.3f}"
        lines.append(f"| {r['api']} | `{r['route']}` | {r['request_throughput']:.1f} | {ratio} "
                     f"| {cpu:.3f} | {cpu_ratio} | {r['output_throughput']:.0f} "
                     f"| {r['median_ttft_ms']:.2f} "
                     f"| {r['p99_ttft_ms']:.2f} | {r['median_tpot_ms']:.3f} | {r['failed']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frontend", choices=("rust", "python"), default="rust")
    parser.add_argument("--apis", default="chat,responses,messages",
                        help="comma-separated, from chat, responses, messages")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, the APIs taking turns")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--prompts", type=int, default=512, help="measured requests a run")
    parser.add_argument("--input-len", type=int, default=512)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None,
                        help="JSON results file (default "
                             "benchmarks/results/api_overhead-<frontend>.json)")
    args = parser.parse_args()
    apis = [a.strip() for a in args.apis.split(",") if a.strip()]
    unknown = [a for a in apis if a not in APIS]
    if unknown or not apis:
        parser.error(f"--apis: unknown {unknown}; choose from {', '.join(APIS)}")
    output = args.output or RESULTS / f"api_overhead-{args.frontend}.json"
    work = Path(tempfile.mkdtemp(prefix="vrs-api-overhead-"))
    server = Server(("serve", "--mock", "--frontend", args.frontend, "--log-level", "warning"),
                    work / "serve.log", f"{args.frontend} frontend")
    runs = []
    try:
        for rnd in range(args.rounds):
            turn = apis[rnd % len(apis):] + apis[:rnd % len(apis)]
            for api in turn:
                result = bench(server, api, args, work / f"{api}-{rnd}.json")
                runs.append({"round": rnd, "api": api,
                             **{k: result[k] for k in (*METRICS, "failed", "completed",
                                                       "duration", "total_output_tokens")}})
                print(f"round {rnd + 1}/{args.rounds} {api:<9} "
                      f"{result['request_throughput']:8.1f} req/s  failed {result['failed']}",
                      file=sys.stderr, flush=True)
    finally:
        server.stop()
    rows = summarize(runs, apis)
    table = markdown(rows, args)
    command = " ".join(["python", "benchmarks/api_overhead.py", *sys.argv[1:]])
    report = {"machine": machine(), "command": command,
              "settings": vars(args) | {"output": str(output)}, "summary": rows, "runs": runs}
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(report, indent=2) + "\n")
    output.with_suffix(".md").write_text(table + "\n")
    print(table)
    slow = [r["api"] for r in rows if r["ratio_to_chat"] is not None
            and r["ratio_to_chat"] < TARGET]
    if slow:
        print(f"\nbelow {TARGET:.0%} of chat's req/s: {', '.join(slow)}", file=sys.stderr)
    failed = sum(r["failed"] for r in runs)
    if failed:
        print(f"\n{failed} requests failed", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
