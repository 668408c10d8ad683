"""Mixture-of-experts layers under the transformers backend: what they cost as transformers
runs them, and what a grouped expert matmul would gain.

The transformers backend (engine/runtime/models/transformers_model.py) runs MoE blocks as
transformers wrote them. transformers 5 dispatches the experts through its
``experts_implementation``: ``eager`` (a loop over the experts that got tokens),
``batched_mm`` (each token's top-k experts' weights gathered, one batched matmul) and
``grouped_mm`` (tokens sorted by expert, ``torch.nn.functional.grouped_mm`` or its
fallback; the default where it dispatches). This times one Qwen3-MoE sparse block
(router, experts, combine) of random weights at several token counts with each, taking
turns, against what a grouped expert matmul has to do and nothing more: each hit
expert's two matmuls over its tokens, already sorted (``ideal``), with the router, the
gathers, the activation and the combine left out.

    python benchmarks/moe_experts.py                 # Qwen3-30B-A3B's ratios, scaled down
    python benchmarks/moe_experts.py --tokens 1,8,64 --rounds 7
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from frontend_overhead import machine  # noqa: E402
from servers import RESULTS  # noqa: E402

IMPLEMENTATIONS = ("eager", "batched_mm", "grouped_mm")


def block(impl: str, args: argparse.Namespace) -> Any:
    """Layer 0's sparse MoE block of a one-layer random Qwen3-MoE (seeded)."""
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    torch.manual_seed(args.seed)
    config = Qwen3MoeConfig(
        vocab_size=256, hidden_size=args.hidden, intermediate_size=args.hidden * 2,
        moe_intermediate_size=args.inter, num_experts=args.experts,
        num_experts_per_tok=args.top_k, num_hidden_layers=1, num_attention_heads=8,
        num_key_value_heads=4, head_dim=64, norm_topk_prob=True,
    )
    model = Qwen3MoeForCausalLM._from_config(config, experts_implementation=impl)
    return model.eval().model.layers[0].mlp.to(args.dtype)


def timed(fn: Any, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls (after one warm call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def ideal(tokens: int, args: argparse.Namespace) -> Any:
    """What a grouped expert matmul has to do, with nothing else: the tokens already
    sorted by expert (``top_k`` distinct experts per token, drawn at random), and each hit
    expert's own weights times its rows, gate/up then down. It reads every hit expert's
    weights, as a grouped kernel must; routing, gathers, the activation and the combine
    are left out."""
    generator = torch.Generator().manual_seed(args.seed)
    choice = torch.stack([torch.randperm(args.experts, generator=generator)[: args.top_k]
                          for _ in range(tokens)])
    counts = torch.bincount(choice.flatten(), minlength=args.experts)
    work = [(torch.randn(int(n), args.hidden, dtype=args.dtype),
             torch.randn(2 * args.inter, args.hidden, dtype=args.dtype),
             torch.randn(args.hidden, args.inter, dtype=args.dtype))
            for n in counts.tolist() if n]

    def run() -> None:
        for x, gate_up, down in work:
            F.linear(F.linear(x, gate_up)[:, : args.inter], down)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--inter", type=int, default=192, help="moe_intermediate_size")
    parser.add_argument("--experts", type=int, default=32)
    parser.add_argument("--top-k", type=int, default=4)
    parser.add_argument("--tokens", default="1,8,64,256")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "moe_experts.json")
    args = parser.parse_args()
    args.dtype = getattr(torch, args.dtype)
    token_counts = [int(t) for t in args.tokens.split(",")]
    print("building the blocks ...", file=sys.stderr, flush=True)
    blocks = {impl: block(impl, args) for impl in IMPLEMENTATIONS}
    names = [*IMPLEMENTATIONS, "ideal grouped matmul"]
    samples: dict[tuple[str, int], list[float]] = {}
    with torch.inference_mode():
        for tokens in token_counts:
            x = torch.randn(1, tokens, args.hidden, dtype=args.dtype)
            want = blocks["eager"](x)
            runs: dict[str, Any] = {impl: (lambda b=blocks[impl], x=x: b(x))
                                    for impl in IMPLEMENTATIONS}
            for impl in IMPLEMENTATIONS:  # the implementations agree before they race
                torch.testing.assert_close(runs[impl](), want, atol=1e-3, rtol=1e-3)
            runs["ideal grouped matmul"] = ideal(tokens, args)
            for rnd in range(args.rounds):
                for name in names[rnd % len(names):] + names[:rnd % len(names)]:
                    samples.setdefault((name, tokens), []).append(
                        timed(runs[name], args.repeats))
            print(f"{tokens} tokens: " + ", ".join(
                f"{n} {1e3 * statistics.median(samples[(n, tokens)]):.3f} ms" for n in names),
                file=sys.stderr, flush=True)
    rows = []
    for tokens in token_counts:
        ms = {n: 1e3 * statistics.median(samples[(n, tokens)]) for n in names}
        best = min(IMPLEMENTATIONS, key=lambda n: ms[n])
        rows.append({"tokens": tokens, "ms": ms, "best": best,
                     "gain_of_grouped_matmul": ms[best] / ms["ideal grouped matmul"]})
    dtype = str(args.dtype).removeprefix("torch.")
    lines = [f"One Qwen3-MoE sparse block: hidden {args.hidden}, {args.experts} experts, "
             f"top {args.top_k}, moe_intermediate {args.inter}, {dtype}, "
             f"{torch.get_num_threads()} torch threads; median of {args.rounds} rounds x "
             f"{args.repeats} calls, taking turns", "",
             "| tokens | " + " | ".join(names) + " | best / ideal |",
             "|---:|" + "---:|" * (len(names) + 1)]
    for row in rows:
        lines.append(f"| {row['tokens']} | " + " | ".join(
            f"{row['ms'][n]:.3f} ms" for n in names)
            + f" | {row['gain_of_grouped_matmul']:.1f}x ({row['best']}) |")
    table = "\n".join(lines)
    report = {**machine(), "torch": torch.__version__, "settings": {
        k: str(v) for k, v in vars(args).items()}, "rows": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
