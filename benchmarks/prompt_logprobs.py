"""Prompt logprobs in the engine: what they cost, and that they cost the others nothing.

ModelEngine in this process (no frontend, no ZMQ), runs taking turns, ``--rounds`` each:

* ``decode``: a batch of ``--batch`` plain requests (``--input-len`` prompt tokens,
  ``--output-len`` generated, greedy, EOS ignored); decode tokens/s = the tokens made
  after every request had its first token, over the time that took. ``decode+plp``: the
  same batch, one request of which also asks for ``prompt_logprobs=5``.
* ``echo``: ``--echo-requests`` requests of ``--echo-len``-token prompts with
  ``prompt_logprobs=1`` and ``max_tokens=1`` (what lm-evaluation-harness's loglikelihood
  sends), all added at once: requests/s. ``prefill-only``: the same without prompt
  logprobs, for scale.

Prompts are random token ids, different per request and round (no prefix-cache hits).
Prints a markdown table of medians and writes JSON to benchmarks/results/.

    python benchmarks/prompt_logprobs.py               # the tiny model of engine_throughput
    python benchmarks/prompt_logprobs.py --demo        # the built-in demo model (129k vocab)
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
for path in (REPO_ROOT, REPO_ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from engine_throughput import TINY, build_model  # noqa: E402

from engine import protocol as p  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.runtime.engine import ModelEngine  # noqa: E402


def prompts(rng: random.Random, count: int, length: int, vocab: int) -> list[list[int]]:
    return [[rng.randrange(3, vocab) for _ in range(length)] for _ in range(count)]


def run_decode(engine: ModelEngine, batch: list[list[int]], output_len: int, plp: bool) -> dict:
    """Decode tokens/s of ``batch``; with ``plp`` its first request asks prompt logprobs."""
    for i, prompt in enumerate(batch):
        params = p.SamplingParams(
            max_tokens=output_len,
            temperature=0.0,
            ignore_eos=True,
            prompt_logprobs=5 if plp and i == 0 else None,
        )
        engine.add_request(p.EngineCoreRequest(f"d{i}", prompt, params, time.time()))
    start = time.perf_counter()
    started: set[str] = set()
    decode_start = 0.0
    decode_tokens = 0
    while engine.has_unfinished_requests():
        outputs = engine.step()
        if len(started) == len(batch):
            decode_tokens += sum(len(o.new_token_ids) for o in outputs)
        for out in outputs:
            if out.new_token_ids and out.request_id not in started:
                started.add(out.request_id)
                if len(started) == len(batch):
                    decode_start = time.perf_counter()
    end = time.perf_counter()
    return {
        "decode_tokens_per_s": decode_tokens / (end - decode_start),
        "elapsed_s": end - start,
    }


def run_echo(engine: ModelEngine, batch: list[list[int]], plp: bool) -> dict:
    """Requests/s of prompt-only requests (max_tokens=1), with or without prompt logprobs."""
    params = p.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1 if plp else None)
    start = time.perf_counter()
    for i, prompt in enumerate(batch):
        engine.add_request(p.EngineCoreRequest(f"e{i}", prompt, params, time.time()))
    entries = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            entries += len(out.prompt_logprobs or ())
    elapsed = time.perf_counter() - start
    if plp:
        assert entries == sum(len(prompt) - 1 for prompt in batch)
    return {"requests_per_s": len(batch) / elapsed, "elapsed_s": elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--demo", action="store_true", help="use the built-in demo model")
    parser.add_argument("--model", help="HF model directory (default: the tiny random Qwen3)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--echo-requests", type=int, default=32)
    parser.add_argument("--echo-len", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory(prefix="plp-bench-") as tmp:
        if args.model:
            model_dir, label = Path(args.model), args.model
        elif args.demo:
            from engine.mock.demo_model import build_demo_model

            model_dir, label = Path(tmp) / "demo", "demo model (random Qwen3, vocab 129280)"
            model_dir.mkdir()
            build_demo_model(model_dir)
        else:
            model_dir = build_model(Path(tmp), TINY, args.seed)
            label = "tiny random Qwen3 (vocab 8192, hidden 256, 4 layers)"
        engine = ModelEngine.from_config(
            EngineConfig(model=str(model_dir), device="cpu", dtype="float32", seed=args.seed)
        )
        rounds = run_rounds(engine, args)

    medians = {name: statistics.median(values) for name, values in rounds.items()}
    result: dict[str, Any] = {
        "model": label,
        "args": vars(args),
        "rounds": rounds,
        "medians": medians,
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    print(f"\n{label}, torch threads {torch.get_num_threads()}, {args.rounds} rounds\n")
    print("| run | median | rounds |\n|---|---:|---|")
    for name, values in rounds.items():
        shown = ", ".join(f"{v:.0f}" if v >= 100 else f"{v:.2f}" for v in values)
        print(f"| {name} | {medians[name]:.2f} | {shown} |")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"prompt_logprobs-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2))
    print(f"\nwrote {path}")


def run_rounds(engine: ModelEngine, args: argparse.Namespace) -> dict[str, list[float]]:
    rng = random.Random(args.seed)
    vocab = engine.vocab_size
    rounds: dict[str, list[float]] = {
        "decode tok/s (plain batch)": [],
        "decode tok/s (one request with prompt_logprobs)": [],
        "batch elapsed s (plain)": [],
        "batch elapsed s (one with prompt_logprobs)": [],
        "echo req/s (prompt_logprobs=1, max_tokens=1)": [],
        "prefill-only req/s (no prompt_logprobs, max_tokens=1)": [],
        "decode ratio (with / without a prompt_logprobs request)": [],
        "echo ratio (prompt_logprobs=1 / prefill-only)": [],
    }
    names = list(rounds)
    # Warm-up at the measured shapes (oneDNN builds its kernels per shape on first use).
    run_decode(engine, prompts(rng, args.batch, args.input_len, vocab), args.output_len, True)
    for plp in (True, False):
        run_echo(engine, prompts(rng, args.echo_requests, args.echo_len, vocab), plp)
    for _ in range(args.rounds):
        for plp in (False, True):
            batch = prompts(rng, args.batch, args.input_len, vocab)
            decode = run_decode(engine, batch, args.output_len, plp)
            rounds[names[1 if plp else 0]].append(decode["decode_tokens_per_s"])
            rounds[names[3 if plp else 2]].append(decode["elapsed_s"])
        for plp in (True, False):
            echo = run_echo(engine, prompts(rng, args.echo_requests, args.echo_len, vocab), plp)
            rounds[names[4 if plp else 5]].append(echo["requests_per_s"])
        # Ratios of the runs made side by side in this round (robust to a drifting load).
        rounds[names[6]].append(rounds[names[1]][-1] / rounds[names[0]][-1])
        rounds[names[7]].append(rounds[names[4]][-1] / rounds[names[5]][-1])
        print(" ".join(f"{v[-1]:.2f}" for v in rounds.values()), flush=True)
    return rounds


if __name__ == "__main__":
    main()
