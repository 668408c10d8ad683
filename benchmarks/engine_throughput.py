"""Engine throughput: vrs's ModelEngine against transformers on the same model.

Three runs over the same prompts (greedy, EOS ignored, every request generates exactly
``--output-len`` tokens), one after the other in this process:

* ``hf-generate``: transformers' static-batch ``generate()`` over all requests at once;
* ``hf-generate-batch``: transformers' continuous-batching ``generate_batch()``;
* ``vrs``: ModelEngine, every request added at t=0, stepped until done.

Reports output tokens/s, TTFT p50/p99 (from t=0), the ratio to the faster transformers
path and how many vrs sequences equal ``generate()``'s token for token. Prints a
markdown table and writes JSON. Without ``--model`` it builds a tiny random Qwen3
(shapes below) in a temporary directory; nothing is downloaded.

    python benchmarks/engine_throughput.py                   # tiny model, CPU
    python benchmarks/engine_throughput.py --demo            # the built-in demo model
    python benchmarks/engine_throughput.py --qwen3-0.6b --device cuda   # real-size shapes
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
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

TINY = dict(
    vocab_size=8192, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
    num_attention_heads=4, num_key_value_heads=2, head_dim=64,
)
QWEN3_0_6B = dict(
    vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
    num_attention_heads=16, num_key_value_heads=8, head_dim=128,
)


def build_model(root: Path, shapes: dict[str, int], seed: int) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        max_position_embeddings=4096, tie_word_embeddings=True, eos_token_id=2,
        bos_token_id=1, pad_token_id=0, rope_theta=1000000.0, **shapes,
    )
    model = Qwen3ForCausalLM(config)
    path = root / "qwen3-random"
    model.save_pretrained(path)
    return path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def summarize(name: str, elapsed: float, ttfts: list[float], outputs: list[list[int]]) -> dict:
    tokens = sum(len(o) for o in outputs)
    return {
        "name": name,
        "elapsed_s": elapsed,
        "output_tokens": tokens,
        "output_tokens_per_s": tokens / elapsed,
        "ttft_p50_ms": 1000 * statistics.median(ttfts),
        "ttft_p99_ms": 1000 * percentile(ttfts, 99),
    }


class _FirstTokenClock:
    """A generate() streamer that notes when the first new tokens come out."""

    def __init__(self) -> None:
        self.calls = 0
        self.first: float | None = None

    def put(self, value: torch.Tensor) -> None:
        self.calls += 1
        if self.calls == 2 and self.first is None:  # call 1 is the prompt
            self.first = time.perf_counter()

    def end(self) -> None:
        pass


def run_hf_generate(model: Any, prompts: list[list[int]], output_len: int) -> dict:
    from transformers import GenerationConfig

    device = next(model.parameters()).device
    config = GenerationConfig(
        max_new_tokens=output_len, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    ids = torch.tensor(prompts, device=device)
    with torch.inference_mode():
        model.generate(ids[:2, :8], generation_config=config.__class__(
            max_new_tokens=4, do_sample=False, eos_token_id=None, pad_token_id=0))
        clock = _FirstTokenClock()
        start = time.perf_counter()
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), generation_config=config, streamer=clock
        )
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
    outputs = out[:, ids.shape[1]:].tolist()
    ttft = (clock.first or start) - start
    result = summarize("hf-generate", elapsed, [ttft] * len(prompts), outputs)
    result["tokens"] = outputs
    return result


def run_hf_generate_batch(model: Any, prompts: list[list[int]], output_len: int) -> dict:
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=output_len, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    with torch.inference_mode():
        model.generate_batch([prompts[0][:8]], generation_config=config.__class__(
            max_new_tokens=4, do_sample=False, eos_token_id=None, pad_token_id=0))
        start = time.perf_counter()
        results = model.generate_batch(prompts, generation_config=config, record_timestamps=True)
        elapsed = time.perf_counter() - start
    by_prompt = {tuple(r.prompt_ids): r for r in results.values()}
    outputs, ttfts = [], []
    for prompt in prompts:
        r = by_prompt[tuple(prompt)]
        outputs.append(list(r.generated_tokens))
        ttfts.append((r.timestamps[0] if r.timestamps else start + elapsed) - start)
    result = summarize("hf-generate-batch", elapsed, ttfts, outputs)
    result["tokens"] = outputs
    return result


def run_vrs(engine: ModelEngine, prompts: list[list[int]], output_len: int) -> dict:
    params = p.SamplingParams(max_tokens=output_len, temperature=0.0, ignore_eos=True)
    # Warm-up: one short request.
    engine.add_request(p.EngineCoreRequest("warmup", prompts[0][:8], params, 0.0))
    while engine.has_unfinished_requests():
        engine.step()
    engine.kv_cache.reset_prefix_cache()  # the measured run starts cold
    outputs: dict[str, list[int]] = {str(i): [] for i in range(len(prompts))}
    first: dict[str, float] = {}
    start = time.perf_counter()
    for i, prompt in enumerate(prompts):
        engine.add_request(p.EngineCoreRequest(str(i), prompt, params, time.time()))
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.new_token_ids:
                first.setdefault(out.request_id, time.perf_counter())
                outputs[out.request_id].extend(out.new_token_ids)
    elapsed = time.perf_counter() - start
    ordered = [outputs[str(i)] for i in range(len(prompts))]
    ttfts = [first[str(i)] - start for i in range(len(prompts))]
    result = summarize("vrs", elapsed, ttfts, ordered)
    result["tokens"] = ordered
    stats = engine.stats()
    result["preemptions"] = stats.num_preemptions
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="HF model directory (default: build a tiny one)")
    parser.add_argument("--qwen3-0.6b", dest="real_size", action="store_true",
                        help="build random weights with Qwen3-0.6B shapes instead")
    parser.add_argument("--demo", action="store_true",
                        help="use the built-in demo model (engine/mock/demo_model.py) instead")
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"])
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--max-num-batched-tokens", type=int, default=2048)
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--skip-generate-batch", action="store_true")
    parser.add_argument("--compare-matmul", action="store_true",
                        help="also run vrs on torch's default matmuls (VRS_CPU_MATMUL=torch)")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs per engine")
    parser.add_argument("--stat", choices=["best", "median"], default="best",
                        help="which of the repeated runs to report (best: least disturbed "
                             "by other load on shared cores)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--json", default=str(REPO_ROOT / "benchmarks/results/engine_throughput.json")
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if args.threads:
        torch.set_num_threads(args.threads)

    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            model_dir = Path(args.model)
            label = model_dir.name
        elif args.demo:
            from engine.mock.demo_model import DEMO_MODEL_CONFIG, build_demo_model

            model_dir = Path(tmp) / "demo"
            model_dir.mkdir()
            build_demo_model(model_dir)
            keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                    "num_attention_heads", "num_key_value_heads", "head_dim")
            label = "vrs demo model (random Qwen3 " + ", ".join(
                f"{k}={DEMO_MODEL_CONFIG[k]}" for k in keys) + ")"
        else:
            shapes = QWEN3_0_6B if args.real_size else TINY
            model_dir = build_model(Path(tmp), shapes, args.seed)
            label = "random Qwen3 " + ", ".join(f"{k}={v}" for k, v in shapes.items())
        from transformers import AutoModelForCausalLM

        dtype = {"auto": torch.float32 if args.device == "cpu" else torch.bfloat16,
                 "float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(args.device).eval()
        vocab = hf.config.vocab_size
        gen = torch.Generator().manual_seed(args.seed)
        prompts = torch.randint(
            3, vocab, (args.num_requests, args.input_len), generator=gen
        ).tolist()

        engine = ModelEngine.from_config(EngineConfig(
            model=str(model_dir), device=args.device, dtype=args.dtype,
            max_num_seqs=max(args.num_requests, 1), block_size=args.block_size,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_model_len=args.input_len + args.output_len + 8,
        ))
        # (name, run, repeated): generate_batch is far behind and slow, so it runs once.
        contenders = [
            ("hf-generate", lambda: run_hf_generate(hf, prompts, args.output_len), True),
            ("vrs", lambda: run_vrs(engine, prompts, args.output_len), True),
        ]
        if args.compare_matmul:  # the same engine on torch's default GEMM, like transformers
            os.environ["VRS_CPU_MATMUL"] = "torch"
            plain = ModelEngine.from_config(engine.config)
            del os.environ["VRS_CPU_MATMUL"]
            contenders.append(
                ("vrs (torch matmuls)", lambda: run_vrs(plain, prompts, args.output_len), True)
            )
        if not args.skip_generate_batch:
            contenders.append((
                "hf-generate-batch",
                lambda: run_hf_generate_batch(hf, prompts, args.output_len),
                False,
            ))
        # Interleaved repeats; each contender is reported by its best or median run.
        trials: dict[str, list[dict]] = {name: [] for name, _, _ in contenders}
        for round_index in range(args.repeat):
            for name, run, repeated in contenders:
                if repeated or round_index == 0:
                    trials[name].append(dict(run(), name=name))
        runs = []
        for name, _, _ in contenders:
            ordered = sorted(trials[name], key=lambda r: r["output_tokens_per_s"])
            pick = ordered[-1] if args.stat == "best" else ordered[len(ordered) // 2]
            chosen = dict(pick)
            chosen["all_tokens_per_s"] = [r["output_tokens_per_s"] for r in trials[name]]
            runs.append(chosen)

    reference = runs[0]["tokens"]
    best_hf = max(r["output_tokens_per_s"] for r in runs if r["name"].startswith("hf"))
    for r in runs:
        r["ratio_vs_best_hf"] = r["output_tokens_per_s"] / best_hf
        tokens = r.pop("tokens")
        r["identical_to_generate"] = sum(a == b for a, b in zip(tokens, reference, strict=True))
    machine = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    if args.device == "cuda":
        machine = torch.cuda.get_device_name()
    report = {
        "model": label, "device": args.device, "machine": machine,
        "torch": torch.__version__, "num_requests": args.num_requests,
        "input_len": args.input_len, "output_len": args.output_len, "repeat": args.repeat,
        "stat": args.stat,
        "command": "python " + " ".join(sys.argv), "runs": runs,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=2))

    print(f"model: {label}; {args.num_requests} requests, in {args.input_len} / "
          f"out {args.output_len}, greedy, EOS ignored; {args.device} ({machine}); "
          f"{args.stat} of {args.repeat} interleaved runs\n")
    print("| engine | output tok/s | TTFT p50 (ms) | TTFT p99 (ms) | vs best HF | "
          "identical to generate() |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in runs:
        print(f"| {r['name']} | {r['output_tokens_per_s']:.0f} | {r['ttft_p50_ms']:.0f} | "
              f"{r['ttft_p99_ms']:.0f} | {r['ratio_vs_best_hf']:.2f}x | "
              f"{r['identical_to_generate']}/{args.num_requests} |")
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
