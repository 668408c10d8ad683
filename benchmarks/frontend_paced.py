"""The paced mode of `frontend_overhead.py` (``--step-ms``): the cost of a streamed token.

Flat out, the mock engine makes steps faster than they can be sent, its output thread
coalesces them, and a request's tokens reach the frontend in one or two messages: that
measures the cost of a request. Paced, the mock sleeps ``--step-ms`` per step and makes
one token per running request per step, as a real model does, so every token is one
engine message in, one detokenize and one SSE chunk out. Each frontend serves chat
streams (``vrs bench serve --backend openai-chat``) at each concurrency, the frontends
taking turns (A B A B ...) for ``--rounds`` rounds; reported are the medians over rounds
of req/s, TTFT and ITL p50/p99, and the CPU time the frontend process alone spent, per
request and per streamed token (warm-up requests included: they went through it too).

``tok/chunk`` checks the premise: the content chunks a request received, from the
bench's own numbers (the sum of a request's ITLs is the time from its first content
chunk to its last, so chunks per request = 1 + (E2EL - TTFT) / mean ITL), against its
tokens. 1.00 means one token per chunk; more means steps were merged on the way (the
engine's coalescing when its output thread fell behind, or the frontend's when it did).
At concurrency 1, ``TTFT - step`` is what the request's first token took beyond the
mock's own step, seen by the client: the frontend's work, the engine's bookkeeping and
the client's own. ``beyond engine`` narrows it from the server's /metrics (the vLLM
histograms both frontends keep, read before and after each run): the mean TTFT the
frontend measured (from the request's arrival to its first output) minus the mean time
the engine reported for the request (``request_queue_time`` + ``request_prefill_time``,
from its arrival at the engine to its first token): the frontend's work before the
engine saw the request, plus the wire both ways.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx
from frontend_servers import FrontendServer, bench

BACKEND = "openai-chat"
PACED_METRICS = ("request_throughput", "output_throughput", "median_ttft_ms", "p99_ttft_ms",
                 "median_itl_ms", "p99_itl_ms", "cpu_ms_per_request", "cpu_us_per_token",
                 "tokens_per_chunk", "beyond_engine_ms")
SERVER_TIMES = ("vllm:time_to_first_token_seconds", "vllm:request_queue_time_seconds",
                "vllm:request_prefill_time_seconds")


def tokens_per_chunk(result: dict[str, Any], output_len: int) -> float | None:
    """Tokens per content chunk (see the module doc); None when it cannot be told."""
    itl = result.get("mean_itl_ms") or 0.0
    span = result.get("mean_e2el_ms", 0.0) - result.get("mean_ttft_ms", 0.0)
    if itl <= 0.0 or span <= 0.0:
        return None
    return output_len / (1.0 + span / itl)


def server_times(url: str) -> dict[str, tuple[float, float]]:
    """(sum, count) of each of ``SERVER_TIMES`` in the server's /metrics (all engines)."""
    totals = {name: [0.0, 0.0] for name in SERVER_TIMES}
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        for name in SERVER_TIMES:
            for part, index in (("_sum", 0), ("_count", 1)):
                if line.startswith(name + part) and line[len(name + part)] in " {":
                    totals[name][index] += float(line.rsplit(" ", 1)[1])
    return {name: (total[0], total[1]) for name, total in totals.items()}


def beyond_engine_ms(before: dict[str, tuple[float, float]],
                     after: dict[str, tuple[float, float]]) -> float | None:
    """Mean server-side TTFT minus the engine's queue + prefill time (module doc), ms."""
    means = []
    for name in SERVER_TIMES:
        total, count = (after[name][i] - before[name][i] for i in (0, 1))
        if count <= 0:
            return None
        means.append(total / count)
    ttft, queue, prefill = means
    return (ttft - queue - prefill) * 1e3


def measure(server: FrontendServer, concurrency: int, args: argparse.Namespace,
            out: Path) -> dict[str, Any]:
    """One paced run: the bench's numbers and the frontend's CPU per request and token."""
    times_before = server_times(server.url)
    result = bench(server, concurrency, args, out, BACKEND)
    times_after = server_times(server.url)
    requests = result["frontend_requests"]
    cpu = result["frontend_cpu_s"]
    tokens = requests * args.output_len
    return {"frontend": server.frontend, "concurrency": concurrency,
            **{k: result[k] for k in ("request_throughput", "output_throughput",
                                       "median_ttft_ms", "p99_ttft_ms", "median_itl_ms",
                                       "p99_itl_ms", "mean_itl_ms", "median_e2el_ms",
                                       "failed", "completed", "duration")},
            "frontend_cpu_s": cpu, "frontend_requests": requests,
            "cpu_ms_per_request": cpu * 1e3 / requests,
            "cpu_us_per_token": cpu * 1e6 / tokens,
            "tokens_per_chunk": tokens_per_chunk(result, args.output_len),
            "beyond_engine_ms": beyond_engine_ms(times_before, times_after)}


def run(servers: dict[str, FrontendServer], concurrencies: list[int],
        args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """Every round of every concurrency, the frontends taking turns."""
    runs = []
    for rnd in range(args.rounds):
        for c in concurrencies:
            for label, server in servers.items():
                result = measure(server, c, args, work / f"paced-{label}-{c}.json")
                runs.append({"round": rnd, **result})
                print(f"round {rnd + 1}/{args.rounds} c={c:<4} {label:<8} "
                      f"{result['request_throughput']:8.1f} req/s  "
                      f"{result['cpu_ms_per_request']:6.2f} CPU ms/req  "
                      f"ITL p99 {result['p99_itl_ms']:6.2f} ms  "
                      f"failed {result['failed']}", file=sys.stderr, flush=True)
    return runs


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarize(runs: list[dict[str, Any]], labels: list[str],
              concurrencies: list[int]) -> list[dict[str, Any]]:
    """One row per concurrency and frontend: the medians over rounds."""
    rows = []
    for c in concurrencies:
        for label in labels:
            cell = [r for r in runs if r["frontend"] == label and r["concurrency"] == c]
            row: dict[str, Any] = {"concurrency": c, "frontend": label}
            for metric in PACED_METRICS:
                row[metric] = _median([r[metric] for r in cell])
            row["failed"] = sum(r["failed"] for r in cell)
            rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], step_ms: float) -> str:
    head = ("| concurrency | frontend | req/s | TTFT p50 (ms) | TTFT p99 (ms) | ITL p50 (ms) "
            "| ITL p99 (ms) | CPU ms / request | CPU µs / token | tok/chunk | failed |\n"
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    lines = [head]
    for row in rows:
        per_chunk = row["tokens_per_chunk"]
        lines.append(
            f"| {row['concurrency']} | {row['frontend']} | {row['request_throughput']:.1f} "
            f"| {row['median_ttft_ms']:.2f} | {row['p99_ttft_ms']:.2f} "
            f"| {row['median_itl_ms']:.2f} | {row['p99_itl_ms']:.2f} "
            f"| {row['cpu_ms_per_request']:.2f} | {row['cpu_us_per_token']:.1f} "
            f"| {'n/a' if per_chunk is None else f'{per_chunk:.2f}'} | {row['failed']} |")
    ones = [r for r in rows if r["concurrency"] == 1]
    if ones:
        lines.append("")
        lines.append(f"Concurrency 1, TTFT p50 − the mock's {step_ms:g} ms step: " + ", ".join(
            f"{r['frontend']} {r['median_ttft_ms'] - step_ms:.2f} ms" for r in ones))
        lines.append("Concurrency 1, server-side TTFT beyond the engine's own time (mean): "
                     + ", ".join(f"{r['frontend']} " + ("n/a" if r["beyond_engine_ms"] is None
                                 else f"{r['beyond_engine_ms']:.3f} ms") for r in ones))
    return "\n".join(lines)


def merged_steps(rows: list[dict[str, Any]], tolerance: float = 0.02) -> list[str]:
    """The rows whose chunks carried more than one token (steps merged on the way)."""
    return [f"c={r['concurrency']} {r['frontend']}: {r['tokens_per_chunk']:.2f} tokens/chunk"
            for r in rows
            if r["tokens_per_chunk"] is not None and r["tokens_per_chunk"] > 1 + tolerance]
