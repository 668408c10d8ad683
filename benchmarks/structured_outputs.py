"""Structured outputs: what a grammar costs the engine.

In this process, on one ModelEngine over the demo model (or ``--model``):

* decode throughput of ``--concurrency`` requests at once, constrained by a
  ``--properties``-property JSON schema against unconstrained, in alternating rounds
  (``--rounds`` of each, taking turns so that both see the same machine); output
  tokens/s over the round's wall time, and TTFT p50 from the round's start;
* the compile time of a 50-property schema, cold (tokenizer info already built) and
  cached, and the TTFT of one request with that schema cold, cached and unconstrained.

Prints a markdown table and writes JSON (``--out``). Nothing is downloaded.

    python benchmarks/structured_outputs.py
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine import protocol as p  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.runtime.engine import ModelEngine  # noqa: E402


def schema(properties: int, tag: str = "") -> dict[str, Any]:
    """An object of ``properties`` required fields: bounded strings, integers, enums."""
    kinds = [
        {"type": "string", "maxLength": 8},
        {"type": "integer", "minimum": 0, "maximum": 999},
        {"enum": ["low", "mid", "high"]},
        {"type": "boolean"},
    ]
    props = {f"{tag}field_{i}": kinds[i % len(kinds)] for i in range(properties)}
    return {"type": "object", "properties": props, "required": list(props)}


def spec_of(s: dict[str, Any]) -> p.StructuredOutputs:
    return p.StructuredOutputs(json=json.dumps(s, separators=(",", ":")))


def one_round(
    engine: ModelEngine,
    spec: p.StructuredOutputs | None,
    concurrency: int,
    max_tokens: int,
    tag: str,
) -> dict[str, float]:
    """All requests added at t=0, stepped to the end."""
    start = time.perf_counter()
    for i in range(concurrency):
        params = p.SamplingParams(
            max_tokens=max_tokens,
            temperature=1.0,
            ignore_eos=spec is None,
            structured_outputs=spec,
        )
        engine.add_request(
            p.EngineCoreRequest(f"{tag}-{i}", [5, 6, 7, 8 + i % 64], params, time.time())
        )
    first: dict[str, float] = {}
    tokens = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.new_token_ids and out.request_id not in first:
                first[out.request_id] = time.perf_counter() - start
            tokens += len(out.new_token_ids)
    wall = time.perf_counter() - start
    return {
        "tokens": tokens,
        "wall_s": wall,
        "tokens_per_s": tokens / wall,
        "ttft_p50_ms": statistics.median(first.values()) * 1e3,
    }


def single_ttft(engine: ModelEngine, spec: p.StructuredOutputs | None, tag: str) -> float:
    start = time.perf_counter()
    params = p.SamplingParams(max_tokens=1, structured_outputs=spec)
    engine.add_request(p.EngineCoreRequest(tag, [5, 6, 7, 8], params, time.time()))
    ttft = None
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.new_token_ids and ttft is None:
                ttft = time.perf_counter() - start
    assert ttft is not None, f"{tag} produced no token"
    return ttft * 1e3


def compile_times(engine: ModelEngine) -> dict[str, float]:
    compiler = engine.grammars
    assert compiler is not None
    compiler.submit(p.StructuredOutputs(regex="x")).future.result()  # tokenizer info
    big = spec_of(schema(50, tag="c"))
    start = time.perf_counter()
    compiler.submit(big).future.result()
    cold = time.perf_counter() - start
    start = time.perf_counter()
    job = compiler.submit(big)
    assert job.future.done()
    job.result()
    cached = time.perf_counter() - start
    ttft_cold = single_ttft(engine, spec_of(schema(50, tag="t")), "ttft-cold")
    ttft_cached = single_ttft(engine, spec_of(schema(50, tag="t")), "ttft-cached")
    ttft_free = single_ttft(engine, None, "ttft-free")
    return {
        "compile_cold_ms": cold * 1e3,
        "compile_cached_ms": cached * 1e3,
        "ttft_cold_ms": ttft_cold,
        "ttft_cached_ms": ttft_cached,
        "ttft_free_ms": ttft_free,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model directory (default: the demo model)")
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--properties", type=int, default=10)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="structured_outputs.json")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.model is None:
        from engine.mock.demo_model import ensure_demo_model

        args.model = str(ensure_demo_model())
    engine = ModelEngine.from_config(EngineConfig(model=args.model, dtype="float32", device="cpu"))
    spec = spec_of(schema(args.properties))
    print(
        f"model {args.model}, torch threads {torch.get_num_threads()}, "
        f"{platform.processor() or platform.machine()}",
        flush=True,
    )
    print("warm-up (tokenizer info, the schema's first compile) ...", flush=True)
    one_round(engine, spec, 4, args.max_tokens, "warm-c")
    one_round(engine, None, 4, 16, "warm-u")
    runs: dict[str, list[dict[str, float]]] = {"constrained": [], "unconstrained": []}
    for r in range(args.rounds):
        for name, s in (("constrained", spec), ("unconstrained", None)):
            # Unconstrained rounds generate as many tokens per request as constrained ones.
            tokens = args.max_tokens
            if s is None and runs["constrained"]:
                tokens = max(1, round(runs["constrained"][-1]["tokens"] / args.concurrency))
            result = one_round(engine, s, args.concurrency, tokens, f"{name}-{r}")
            runs[name].append(result)
            print(
                f"round {r + 1}/{args.rounds} {name:13} {result['tokens_per_s']:8.0f} tok/s "
                f"({result['tokens']} tokens, TTFT p50 {result['ttft_p50_ms']:.0f} ms)",
                flush=True,
            )
    print("compile times and single-request TTFT ...", flush=True)
    compile_result = compile_times(engine)
    med = {
        name: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for name, rs in runs.items()
    }
    ratio = med["constrained"]["tokens_per_s"] / med["unconstrained"]["tokens_per_s"]
    print()
    print(
        f"| {args.concurrency} requests | tokens/s (median of {args.rounds}) | "
        "TTFT p50 ms | tokens |"
    )
    print("|---|---:|---:|---:|")
    for name in ("unconstrained", "constrained"):
        m = med[name]
        print(f"| {name} | {m['tokens_per_s']:.0f} | {m['ttft_p50_ms']:.0f} | {m['tokens']:.0f} |")
    print(f"\nconstrained / unconstrained throughput: {ratio:.2f}")
    c = compile_result
    print(
        f"50-property schema: compile cold {c['compile_cold_ms']:.0f} ms, cached "
        f"{c['compile_cached_ms']:.3f} ms; one request's TTFT: cold {c['ttft_cold_ms']:.0f} "
        f"ms, cached {c['ttft_cached_ms']:.1f} ms, unconstrained {c['ttft_free_ms']:.1f} ms"
    )
    Path(args.out).write_text(
        json.dumps(
            {
                "runs": runs,
                "median": med,
                "ratio": ratio,
                "compile": compile_result,
                "args": vars(args),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
