"""Engine throughput: vrs served end to end against transformers' static ``generate()``,
and both against the machine's own matmul rate.

The model (``--shape``, default bench13m: see engine_models.py; or ``--model DIR``) is
built with random seeded weights and a tokenizer. Then:

1. the matmul rate: each matmul of a decode step with ``--num-requests`` rows, through
   the engine's own linear, in float32 and bfloat16 (engine_matmul.py);
2. rounds (``--rounds``), the contenders taking turns (round r starts with the r-th):
   * ``vrs serve`` (default dtype unless ``--serve-dtype``; one contender per
     ``--serve-attention`` x ``--model-impl`` value) driven by ``vrs bench serve``:
     ``--num-requests`` random prompts of ``--input-len`` tokens on /v1/completions, all at
     once (``--concurrency``), greedy, ``--ignore-eos``, ``--output-len`` tokens each
     (engine_serve.py);
   * transformers' static ``generate()`` over the same number of random prompts of the
     same length, in each of ``--hf-dtypes`` (engine_hf.py);
   * with ``--in-process``: the engine stepped in this process (engine_inprocess.py).
3. greedy parity (``--parity N``): the in-process engine in float32 against transformers'
   float32 ``generate()`` on N prompts, token for token.

Reports per contender the median over rounds of output tok/s and TTFT (from t = 0), the
ratio to the better transformers dtype, and the effective matmul rate (matmul FLOPs of
the run over its wall time, attention FLOPs left out: engine_matmul.py) as a fraction of
the matmul rate in the contender's dtype. Markdown and JSON go to
benchmarks/results/engine_throughput.{md,json}.

    python benchmarks/engine_throughput.py                        # bench13m, 3 rounds
    python benchmarks/engine_throughput.py --in-process --parity 8 --rounds 5
    python benchmarks/engine_throughput.py --family llama --model-impl vrs,transformers
    python benchmarks/engine_throughput.py --shape qwen3-0.6b --device cuda \\
        --num-requests 256 --concurrency 256      # benchmarks/gpu.sh
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import REPO_ROOT, RESULTS  # noqa: E402

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine_hf import load_hf, run_generate  # noqa: E402
from engine_matmul import decoder_config, matmul_rate, run_flops  # noqa: E402
from engine_models import FAMILIES, SHAPES, build_model, random_prompts  # noqa: E402
from engine_serve import ServedEngine  # noqa: E402
from frontend_overhead import machine  # noqa: E402

METRICS = ("output_tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "elapsed_s")


def contenders(args: argparse.Namespace, model_dir: Path, work: Path,
               closers: list[Callable[[], None]]) -> dict[str, Callable[[int], dict[str, Any]]]:
    """name -> run(round index): each returns one run's summary."""
    runs: dict[str, Callable[[int], dict[str, Any]]] = {}
    for attention in args.serve_attention.split(","):
        for impl in args.model_impl.split(","):
            served = ServedEngine(model_dir, work, args, attention, impl)
            closers.append(served.stop)
            notes = [n for n in (attention, f"--model-impl {impl}") if n != "auto"
                     and n != "--model-impl auto"]
            runs["vrs serve" + (f" ({', '.join(notes)})" if notes else "")] = served.run
    for dtype in args.hf_dtypes.split(","):
        model = load_hf(model_dir, dtype, args.device)
        prompts = random_prompts(args.num_requests, args.input_len, args.vocab, args.seed)

        def hf(_: int, model: Any = model, prompts: list[list[int]] = prompts,
               dtype: str = dtype) -> dict[str, Any]:
            result = run_generate(model, prompts, args.output_len)
            result.pop("tokens")
            return {**result, "dtype": dtype, "input_tokens": args.input_len * len(prompts)}

        runs[f"transformers generate() {dtype}"] = hf
    if args.in_process:
        from engine_inprocess import make_engine, run_engine

        engine = make_engine(model_dir, args.serve_dtype, args.device, args.num_requests,
                             args.input_len + args.output_len + 8)
        prompts = random_prompts(args.num_requests, args.input_len, args.vocab, args.seed)

        def local(_: int) -> dict[str, Any]:
            result = run_engine(engine, prompts, args.output_len)
            result.pop("tokens")
            return {**result, "input_tokens": args.input_len * len(prompts)}

        runs["vrs in-process"] = local
    return runs


def parity(model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    """In-process engine (float32) against transformers' float32 generate(), greedy."""
    from engine_inprocess import make_engine, run_engine

    prompts = random_prompts(args.parity, args.input_len, args.vocab, args.seed + 7)
    engine = make_engine(model_dir, "float32", args.device, args.parity,
                         args.input_len + args.output_len + 8)
    ours = run_engine(engine, prompts, args.output_len)["tokens"]
    theirs = run_generate(load_hf(model_dir, "float32", args.device), prompts,
                          args.output_len)["tokens"]
    same = sum(a == b for a, b in zip(ours, theirs, strict=True))
    return {"prompts": args.parity, "identical": same, "dtype": "float32"}


def summarize(trials: dict[str, list[dict[str, Any]]], rates: dict[str, Any],
              cfg: Any) -> list[dict[str, Any]]:
    rows = []
    for name, runs in trials.items():
        row: dict[str, Any] = {"name": name, "dtype": runs[0]["dtype"]}
        row.update({m: statistics.median(r[m] for r in runs) for m in METRICS})
        row["rounds_tokens_per_s"] = [round(r["output_tokens_per_s"]) for r in runs]
        flops = run_flops(cfg, runs[0]["requests"], runs[0]["input_tokens"],
                          runs[0]["output_tokens"])
        row["matmul_gflops"] = flops["matmul"] / row["elapsed_s"] / 1e9
        row["attention_gflops"] = flops["attention"] / row["elapsed_s"] / 1e9
        rate = rates.get(row["dtype"])
        row["fraction_of_matmul_rate"] = (row["matmul_gflops"] / rate["step_gflops"]
                                          if rate else None)
        rows.append(row)
    best_hf = max(r["output_tokens_per_s"] for r in rows if r["name"].startswith("transformers"))
    for row in rows:
        row["vs_best_transformers"] = row["output_tokens_per_s"] / best_hf
    return rows


def markdown(rows: list[dict[str, Any]], rates: dict[str, Any], report: dict[str, Any]) -> str:
    a = report["settings"]
    lines = [f"{report['model']}; {a['num_requests']} requests, {a['input_len']} in / "
             f"{a['output_len']} out, greedy, EOS ignored; {a['device']} ({report['cpu']}, "
             f"{report['threads']} torch threads); median of {a['rounds']} rounds", "",
             "| contender | dtype | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | vs best "
             "transformers | matmul GFLOP/s | of the matmul rate | rounds (tok/s) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        frac = r["fraction_of_matmul_rate"]
        lines.append(f"| {r['name']} | {r['dtype']} | {r['output_tokens_per_s']:.0f} | "
                     f"{r['ttft_p50_ms']:.0f} | {r['ttft_p99_ms']:.0f} | "
                     f"{r['vs_best_transformers']:.2f}x | {r['matmul_gflops']:.1f} | "
                     f"{'' if frac is None else f'{100 * frac:.1f} %'} | "
                     f"{', '.join(map(str, r['rounds_tokens_per_s']))} |")
    lines += ["", f"Matmul rate, {a['num_requests']} rows, through the engine's linear "
              "(GFLOP/s):", "",
              "| dtype | backend | " + " | ".join(next(iter(rates.values()))["shapes"]) +
              " | decode-step mix |",
              "|---|---|" + "---:|" * (len(next(iter(rates.values()))["shapes"]) + 1)]
    for rate in rates.values():
        lines.append(f"| {rate['dtype']} | {rate['backend']} | " + " | ".join(
            f"{s['gflops']:.1f}" for s in rate["shapes"].values()) +
            f" | {rate['step_gflops']:.1f} |")
    if report.get("parity"):
        par = report["parity"]
        lines += ["", f"Greedy parity ({par['dtype']}, in-process engine against "
                  f"generate()): {par['identical']}/{par['prompts']} identical"]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="bench13m", choices=sorted(SHAPES))
    parser.add_argument("--family", default="qwen3", choices=FAMILIES,
                        help="the architecture built at --shape's sizes")
    parser.add_argument("--model-impl", default="auto",
                        help="--model-impl of the served engine; several (e.g. "
                             "vrs,transformers) are contenders taking turns")
    parser.add_argument("--model", type=Path, help="a model directory instead of --shape "
                        "(it needs a tokenizer for vrs serve)")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--serve-dtype", default="auto",
                        choices=["auto", "float32", "bfloat16"], help="vrs's dtype")
    parser.add_argument("--serve-attention", default="auto",
                        help="VRS_ATTENTION of the served engine; several (e.g. sdpa,resident) "
                             "are contenders taking turns")
    parser.add_argument("--hf-dtypes", default="float32,bfloat16",
                        help="comma-separated dtypes transformers runs in")
    parser.add_argument("--in-process", action="store_true",
                        help="also the engine stepped in this process")
    parser.add_argument("--parity", type=int, default=0, metavar="N",
                        help="greedy parity on N prompts, float32 (0: none)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "engine_throughput.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device")
    if args.rounds < 3:
        print(f"{args.rounds} round(s): a smoke run, not a number to quote (3 or more)",
              file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="vrs-engine-throughput-"))
    model_dir = args.model or build_model(work, args.shape, args.seed, args.family)
    cfg = decoder_config(model_dir)
    args.vocab = cfg.vocab_size
    print("matmul rate ...", file=sys.stderr, flush=True)
    rates = {d: matmul_rate(model_dir, d, args.device, args.num_requests)
             for d in ("float32", "bfloat16")}
    report: dict[str, Any] = {"model": str(model_dir) if args.model else
                              f"random {args.family} {args.shape} ({cfg.vocab_size} vocab)",
                              **machine(), "torch": torch.__version__,
                              "threads": torch.get_num_threads(),
                              "command": "python benchmarks/engine_throughput.py "
                              + " ".join(sys.argv[1:]), "matmul_rates": rates}
    closers: list[Callable[[], None]] = []
    try:
        runs = contenders(args, model_dir, work, closers)
        trials: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
        names = list(runs)
        for rnd in range(args.rounds):
            for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                trials[name].append(runs[name](rnd))
                print(f"round {rnd + 1}/{args.rounds} {name}: "
                      f"{trials[name][-1]['output_tokens_per_s']:.0f} tok/s",
                      file=sys.stderr, flush=True)
    finally:
        for close in closers:
            close()
    report["parity"] = parity(model_dir, args) if args.parity else None
    if not args.model:  # the weights go (gigabytes at real shapes); the logs stay
        shutil.rmtree(model_dir, ignore_errors=True)
    print(f"server log and bench results: {work}", file=sys.stderr)
    report["settings"] = {k: str(v) for k, v in vars(args).items()}
    report["rows"] = summarize(trials, rates, cfg)
    table = markdown(report["rows"], rates, report)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2, default=str) + "\n")
    args.output.with_suffix(".md").write_text(table + "\n")
    print(table)
    failed = sum(r.get("failed", 0) for runs_ in trials.values() for r in runs_)
    par = report["parity"]
    if failed or (par and par["identical"] < par["prompts"]):
        print(f"\n{failed} failed requests; parity {par}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
