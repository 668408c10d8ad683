"""Compiled decoder against eager: engine decode-step time, A/B in one process.

Two ModelEngines on the same random Qwen3 (the bench13m shape: hidden 512, intermediate
1536, 4 layers, 8 / 4 heads, head_dim 64, vocab 8192), one eager, one compiled
(``VRS_COMPILE=on``). Both get the same 64 requests (128 random prompt tokens, greedy,
EOS ignored) and are prefilled; then rounds take turns: ``--steps`` decode steps on one
engine, then on the other. Prints the median step time of each per round, the ratio,
the compile time and how many of the sampled tokens agree between the two.

    python benchmarks/decoder_compile.py --dtype bfloat16 --rounds 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine import protocol as p  # noqa: E402
from engine.config import EngineConfig  # noqa: E402
from engine.runtime.engine import ModelEngine  # noqa: E402

BENCH13M = dict(vocab_size=8192, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                num_attention_heads=8, num_key_value_heads=4, head_dim=64)


def build_model(root: Path) -> Path:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(max_position_embeddings=4096, tie_word_embeddings=True,
                         eos_token_id=2, bos_token_id=1, pad_token_id=0, rope_theta=1e6,
                         **BENCH13M)
    path = root / "bench13m"
    Qwen3ForCausalLM(config).save_pretrained(path)
    return path


def start(model: Path, dtype: str, compiled: bool, args: argparse.Namespace) -> ModelEngine:
    os.environ["VRS_COMPILE"] = "on" if compiled else "off"
    engine = ModelEngine.from_config(EngineConfig(
        model=str(model), device="cpu", dtype=dtype, max_num_seqs=args.num_seqs))
    gen = torch.Generator().manual_seed(0)
    for i in range(args.num_seqs):
        prompt = torch.randint(3, 8000, (args.input_len,), generator=gen).tolist()
        params = p.SamplingParams(max_tokens=1024, temperature=0.0, ignore_eos=True)
        engine.add_request(p.EngineCoreRequest(f"r{i}", prompt, params, 0.0))
    while any(r.num_computed_tokens < r.num_prompt_tokens
              for r in engine.scheduler.requests.values()):
        engine.step()
    return engine


def timed_steps(engine: ModelEngine, steps: int, tokens: list[list[int]]) -> float:
    times = []
    for _ in range(steps):
        begin = time.perf_counter()
        outputs = engine.step()
        times.append(time.perf_counter() - begin)
        tokens.append([o.new_token_ids[0] for o in outputs])
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--num-seqs", type=int, default=64)
    parser.add_argument("--input-len", type=int, default=128)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(prefix="decoder-compile-") as root:
        model = build_model(Path(root))
        eager = start(model, args.dtype, False, args)
        begin = time.perf_counter()
        compiled = start(model, args.dtype, True, args)
        print(f"compiled engine started (compile + prefill) in {time.perf_counter() - begin:.1f}s")
        eager_tokens: list[list[int]] = []
        compiled_tokens: list[list[int]] = []
        ratios = []
        for round_ in range(args.rounds):
            a = timed_steps(eager, args.steps, eager_tokens)
            b = timed_steps(compiled, args.steps, compiled_tokens)
            ratios.append(a / b)
            print(f"round {round_}: eager {a * 1e3:.2f} ms  compiled {b * 1e3:.2f} ms  "
                  f"eager/compiled {a / b:.3f}")
    same = sum(x == y for xs, ys in zip(eager_tokens, compiled_tokens, strict=True)
               for x, y in zip(xs, ys, strict=True))
    total = sum(len(xs) for xs in eager_tokens)
    print(f"{args.dtype}, {args.threads} threads, {args.num_seqs} seqs: median eager/compiled "
          f"{statistics.median(ratios):.3f} over {args.rounds} rounds; tokens equal "
          f"{same}/{total}")


if __name__ == "__main__":
    main()
