"""Tool-call parser cost: streamed chat answers with a tool call, parsed and not parsed.

Starts ``vrs serve --mock`` (the Rust frontend, the demo model, whose template writes the
``demo`` tool-call format) with ``--mock-replies`` scripting one answer of
``--reply-tokens`` tokens: prose, then one ``demo`` call. Then, in alternating rounds
(tools, plain, tools, plain, ...; ``--rounds`` of each), ``--requests`` streamed chat
requests at ``--concurrency`` ask for that answer, both with ``tools`` (so the prompts are
the same): ``tool_choice`` ``auto`` (the parser splits the call out and streams its
argument deltas) or ``none`` (the output is not parsed: the same text streams as content).
``--step-delay-ms`` slows the mock engine so that tokens arrive one by one (at full speed
the frontend coalesces them into fewer chunks). Reports per round requests/s, streamed
chunks/s and per request, TTFT p50 / TPOT p50 (per chunk), the frontend's CPU time per
request (user + system time of the server's processes other than the engine, read from
/proc: what the parser adds, free of the client's own limits), the medians over rounds of
each kind, and the tools/plain ratio, as a markdown table and JSON (``--out``).
``--frontend python`` measures the uvicorn frontend instead of the Rust one. The client is
Python (asyncio + httpx), the same for both kinds; it reads every SSE line.

    python benchmarks/tool_parsers.py                         # 5 rounds, c = 64, 512 requests
    python benchmarks/tool_parsers.py --rounds 1 --requests 16 --concurrency 4   # smoke run

Needs vrs-rs (``pip install .``, or VRS_RUST_FRONTEND_PATH pointing at a build); nothing
is downloaded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import REPO_ROOT, Server  # noqa: E402

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine.mock.demo_model import ensure_demo_model  # noqa: E402

KINDS = ("tools", "plain")
WHEN = "[tool-parser-bench]"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Current weather of a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}}}]
CALL = ('<｜tool▁call▁begin｜>{"name": "get_weather", "arguments": '
        '{"city": "Paris", "unit": "celsius"}}<｜tool▁call▁end｜>')
PROSE = "Let me look up the current weather for you in the city you asked about. "


def reply_of(tokens: int) -> str:
    """Prose, then the call, of exactly ``tokens`` tokens of the demo model's tokenizer."""
    import tokenizers

    tok = tokenizers.Tokenizer.from_file(str(ensure_demo_model() / "tokenizer.json"))

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    words = (PROSE * 64).split(" ")
    best = CALL
    for n in range(1, len(words)):
        text = " ".join(words[:n]) + " " + CALL
        if count(text) > tokens:
            break
        best = text
    if count(best) != tokens:
        raise SystemExit(f"no reply of exactly {tokens} tokens (got {count(best)}); "
                         "pick another --reply-tokens")
    return best


class MockServer(Server):
    """`vrs serve --mock --mock-replies FILE`; stopped by a SIGTERM to its whole session."""

    def __init__(self, replies: Path, log: Path, step_delay_ms: float, frontend: str) -> None:
        super().__init__(("serve", "--mock", "--mock-replies", str(replies),
                          "--mock-step-delay-ms", str(step_delay_ms), "--log-level", "warning",
                          *(["--frontend", "python"] if frontend == "python" else [])),
                         log, "the server", stop_session=True)


def body(kind: str) -> dict[str, Any]:
    request: dict[str, Any] = {"messages": [{"role": "user", "content": f"{WHEN} weather?"}],
                               "stream": True, "max_tokens": 512}
    request["tools"] = TOOLS  # the same prompt for both kinds: only the parsing differs
    if kind == "plain":
        request["tool_choice"] = "none"
    return request


async def one(client: httpx.AsyncClient, url: str, request: dict[str, Any],
              keep: list[str] | None) -> tuple[float, float, int]:
    """(TTFT s, end-to-end s, chunks) of one streamed request; ``keep`` collects its lines."""
    start = time.perf_counter()
    first = 0.0
    chunks = 0
    async with client.stream("POST", f"{url}/v1/chat/completions", json=request) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            chunks += 1
            if not first:
                first = time.perf_counter() - start
            if keep is not None:
                keep.append(line[6:])
    return first, time.perf_counter() - start, chunks


async def round_of(server: MockServer, kind: str, requests: int,
                   concurrency: int) -> dict[str, Any]:
    url = server.url
    request = body(kind)
    cpu = server.frontend_cpu_s()
    pending = list(range(requests))
    results: list[tuple[float, float, int]] = []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        async def worker() -> None:
            while pending:
                pending.pop()
                results.append(await one(client, url, request, None))

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
    cpu = server.frontend_cpu_s() - cpu
    ttfts = [r[0] for r in results]
    tpots = [(r[1] - r[0]) / max(r[2] - 2, 1) for r in results]
    return {"kind": kind, "wall_s": wall, "requests_per_s": requests / wall,
            "chunks_per_s": sum(r[2] for r in results) / wall,
            "chunks_per_request": sum(r[2] for r in results) / len(results),
            "ttft_p50_ms": statistics.median(ttfts) * 1e3,
            "tpot_p50_ms": statistics.median(tpots) * 1e3,
            "frontend_cpu_ms_per_request": cpu * 1e3 / requests}


async def check(url: str) -> None:
    """Both kinds answer as intended: a streamed call with tools, the text without."""
    for kind in KINDS:
        lines: list[str] = []
        async with httpx.AsyncClient(timeout=60) as client:
            await one(client, url, body(kind), lines)
        events = [json.loads(x) for x in lines if x != "[DONE]"]
        deltas = [c["delta"] for e in events for c in e.get("choices", [])]
        calls = [t for d in deltas for t in d.get("tool_calls", [])]
        content = "".join(d.get("content") or "" for d in deltas)
        if kind == "tools" and not (calls and calls[0]["function"]["name"] == "get_weather"):
            raise RuntimeError(f"tool_choice auto: no streamed call: {lines[:4]}")
        if kind == "plain" and "<｜tool▁call▁begin｜>" not in content:
            raise RuntimeError(f"tool_choice none: the call text is not content: {content!r}")


METRICS = ("requests_per_s", "chunks_per_s", "chunks_per_request", "ttft_p50_ms",
           "tpot_p50_ms", "frontend_cpu_ms_per_request")


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    med = {k: {m: statistics.median(r[m] for r in runs if r["kind"] == k) for m in METRICS}
           for k in KINDS}
    med["ratio"] = {m: med["tools"][m] / med["plain"][m] for m in METRICS}
    return med


def markdown(med: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    lines = [f"{args.frontend} frontend: "
             f"{args.reply_tokens}-token streamed replies with one `demo` call, concurrency "
             f"{args.concurrency}, {args.requests} requests a round, mock step delay "
             f"{args.step_delay_ms} ms, median of {args.rounds} rounds each", "",
             "| | req/s | chunks/s | chunks/request | TTFT p50 (ms) | TPOT p50 (ms) "
             "| frontend CPU ms/request |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for k, label in (("tools", "tool_choice auto (parsed)"),
                     ("plain", "tool_choice none (not parsed)"), ("ratio", "auto / none")):
        m = med[k]
        fmt = "{:.3f}" if k == "ratio" else "{:.1f}"
        lines.append(f"| {label} | " + " | ".join(fmt.format(m[x]) for x in METRICS) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--reply-tokens", type=int, default=128)
    parser.add_argument("--step-delay-ms", type=float, default=0.0,
                        help="the mock engine's delay per step (0: as fast as it goes, so the "
                             "frontend may coalesce tokens into fewer chunks)")
    parser.add_argument("--frontend", choices=("rust", "python"), default="rust")
    parser.add_argument("--out", type=Path, default=None, help="JSON results file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vrs-tool-parsers-"))
    replies = work / "replies.json"
    replies.write_text(json.dumps([{"when": WHEN, "reply": reply_of(args.reply_tokens)}]))
    server = MockServer(replies, work / "server.log", args.step_delay_ms, args.frontend)
    try:
        asyncio.run(check(server.url))
        asyncio.run(round_of(server, "tools", args.concurrency, args.concurrency))  # warm-up
        runs = []
        for i in range(args.rounds):
            for kind in KINDS if i % 2 == 0 else KINDS[::-1]:
                runs.append(asyncio.run(round_of(server, kind, args.requests,
                                                 args.concurrency)))
                print(json.dumps(runs[-1]), file=sys.stderr)
    finally:
        server.stop()
    med = summarize(runs)
    print(markdown(med, args))
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              "args": {k: str(v) for k, v in vars(args).items()}, "runs": runs, "median": med}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
