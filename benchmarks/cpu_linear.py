"""The CPU matmul options of the decoder's linears, per dtype, at decode shapes.

For each linear of a Qwen3-shaped model (fused q/k/v, o, fused gate/up, down, LM head)
and each row count (a decode step's batch), times every backend the decoder could pick:

* ``torch``: ``F.linear`` (torch's default CPU GEMM for the dtype);
* ``onednn``: ``torch.ops.mkldnn._linear_pointwise`` on the plain weight, rows padded to
  the engine's bucket sizes (``row_bucket``);
* ``onednn-packed``: the same on a weight reordered once into oneDNN's blocked layout
  by ``torch.ops.mkldnn._reorder_linear_weight`` (what the engine's ``auto`` uses).

Backends take turns, shape by shape, round by round; the table holds medians (µs per
call) and GFLOP/s summed over the model's linears. Run on a quiet machine::

    python benchmarks/cpu_linear.py --rounds 7 --threads 1
    python benchmarks/cpu_linear.py --dtype bfloat16 --rows 1,16,64,256

A call repeated on one weight reads it from the CPU's caches. A decode step does not: it
reads every layer's weights once, more bytes than the caches hold, so a small batch is
bound by the memory's read rate. ``--whole-model LAYERS`` measures that: LAYERS layers of
distinct weights plus the LM head (float32), every linear called once per pass in the
forward's order, per row count; it reports ms per pass and the weight bytes read per
second, and adds ``numpy`` (numpy's own BLAS, OpenBLAS in its wheels) as a reference
that is not one of the engine's backends::

    python benchmarks/cpu_linear.py --whole-model 4 --vocab 8192 --threads 2 --rows 1,2,4,8
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.runtime.device import cpu_bf16_flag, cpu_flags  # noqa: E402
from engine.runtime.models.decoder import row_bucket  # noqa: E402

Fn = Callable[[torch.Tensor], torch.Tensor]


def model_linears(args: argparse.Namespace) -> dict[str, tuple[int, int]]:
    """``name -> (in_features, out_features)`` of one layer's linears and the LM head."""
    h, d = args.hidden, args.head_dim
    return {
        "qkv": (h, (args.heads + 2 * args.kv_heads) * d),
        "o": (args.heads * d, h),
        "gate_up": (h, 2 * args.intermediate),
        "down": (args.intermediate, h),
        "lm_head": (h, args.vocab),
    }


def backends(weight: torch.Tensor) -> dict[str, Fn]:
    """Every backend that runs for this weight's dtype on this torch, checked against F.linear."""

    def padded(w: torch.Tensor) -> Fn:
        def run(x: torch.Tensor) -> torch.Tensor:
            rows = x.shape[0]
            pad = row_bucket(rows)
            if pad != rows:
                x = F.pad(x, (0, 0, 0, pad - rows))
            return torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")[:rows]

        return run

    found: dict[str, Fn] = {"torch": lambda x: F.linear(x, weight)}
    if torch.backends.mkldnn.is_available():
        found["onednn"] = padded(weight)
        try:
            found["onednn-packed"] = padded(torch.ops.mkldnn._reorder_linear_weight(weight, 64))
        except (RuntimeError, AttributeError) as exc:
            print(f"onednn-packed unavailable: {exc}", file=sys.stderr)
    x = torch.randn(3, weight.shape[1]).to(weight.dtype)
    ref = F.linear(x, weight).float()
    for name in list(found):
        try:
            got = found[name](x).float()
        except (RuntimeError, AttributeError) as exc:
            print(f"{name} fails: {exc}", file=sys.stderr)
            del found[name]
            continue
        tol = 1e-4 if weight.dtype == torch.float32 else 5e-2
        if not torch.allclose(got, ref, atol=tol, rtol=tol):
            print(f"{name} disagrees with F.linear; dropped", file=sys.stderr)
            del found[name]
    return found


def numpy_linear(weight: torch.Tensor) -> Fn:
    """``x @ weight.T`` through numpy's BLAS on the same memory (no copy of the weight)."""
    plain = weight.numpy()

    def run(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(np.matmul(x.numpy(), plain.T))

    return run


def one_pass(fns: list[dict[str, Fn]], xs: list[torch.Tensor], name: str) -> None:
    for fn, x in zip(fns, xs, strict=True):
        fn[name](x)


def whole_model(args: argparse.Namespace, rows_list: list[int]) -> None:
    """ms per pass over every linear of ``args.whole_model`` layers and the LM head, and
    the weight bytes read per second, per backend and row count (float32)."""
    linears = model_linears(args)
    shapes = [linears[n] for n in ("qkv", "o", "gate_up", "down")] * args.whole_model
    shapes.append(linears["lm_head"])
    torch.manual_seed(0)
    weights = [torch.randn(o, i) * 0.05 for i, o in shapes]
    fns = [{**backends(w), "numpy": numpy_linear(w)} for w in weights]
    names = list(fns[0])
    weight_bytes = sum(w.numel() * w.element_size() for w in weights)
    print(f"{args.whole_model} layers + LM head: {weight_bytes / 2**20:.1f} MiB of float32 "
          "weights read per pass")
    samples: dict[tuple[str, int], list[float]] = {}
    for done in range(args.rounds):
        for rows in rows_list:
            xs = [torch.randn(rows, i) for i, _ in shapes]
            for name in names:
                one_pass(fns, xs, name)  # warm: a new shape builds a kernel
                for _ in range(args.calls):
                    start = time.perf_counter()
                    one_pass(fns, xs, name)
                    samples.setdefault((name, rows), []).append(time.perf_counter() - start)
        print(f"\rround {done + 1}/{args.rounds}", end="", file=sys.stderr)
    print(file=sys.stderr)
    print(f"| rows | {' | '.join(names)} |")
    print(f"|---|{'---|' * len(names)}")
    for rows in rows_list:
        cells = []
        for name in names:
            s = statistics.median(samples[(name, rows)])
            cells.append(f"{s * 1e3:.2f} ms ({weight_bytes / s / 1e9:.1f} GB/s)")
        print(f"| {rows} | {' | '.join(cells)} |")


def time_call(fn: Fn, x: torch.Tensor, calls: int) -> float:
    """Median-friendly single sample: µs per call over ``calls`` calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtype", default="both", choices=("both", "float32", "bfloat16"))
    parser.add_argument("--rows", default="1,4,16,64,128,256")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="calls per timed sample")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--hidden", type=int, default=512)
    parser.add_argument("--intermediate", type=int, default=1536)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--whole-model", type=int, default=0, metavar="LAYERS",
                        help="time passes over LAYERS layers' linears and the LM head "
                             "(float32), as a decode step reads them")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dtypes = ("float32", "bfloat16") if args.dtype == "both" else (args.dtype,)
    rows_list = [int(r) for r in args.rows.split(",")]
    linears = model_linears(args)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"capability {torch.backends.cpu.get_cpu_capability()}, "
          f"native bf16: {cpu_bf16_flag(cpu_flags()) or 'no'}")
    if args.whole_model:
        with torch.inference_mode():
            whole_model(args, rows_list)
        return
    torch.manual_seed(0)
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        weights = {n: (torch.randn(o, i) * 0.05).to(dtype) for n, (i, o) in linears.items()}
        fns = {n: backends(w) for n, w in weights.items()}
        names = list(fns["qkv"])
        samples: dict[tuple[str, str, int], list[float]] = {}
        total = args.rounds * len(rows_list) * len(linears)
        done = 0
        for _ in range(args.rounds):
            for rows in rows_list:
                for lin, (fin, _) in linears.items():
                    x = torch.randn(rows, fin).to(dtype)
                    for name in names:
                        fns[lin][name](x)  # warm (a new shape builds a kernel)
                        key = (lin, name, rows)
                        samples.setdefault(key, []).append(time_call(fns[lin][name], x, args.calls))
                    done += 1
                print(f"\r{dtype_name}: {done}/{total} shapes timed", end="", file=sys.stderr)
        print(file=sys.stderr)
        print(f"\n{dtype_name}: median µs per call (GFLOP/s over all linears)")
        print(f"| rows | linear | {' | '.join(names)} |")
        print(f"|---|---|{'---|' * len(names)}")
        for rows in rows_list:
            for lin in linears:
                cells = [f"{statistics.median(samples[(lin, n, rows)]):.0f}" for n in names]
                print(f"| {rows} | {lin} | {' | '.join(cells)} |")
            flops = sum(2 * rows * i * o for i, o in linears.values())
            rates = []
            for n in names:
                us = sum(statistics.median(samples[(lin, n, rows)]) for lin in linears)
                rates.append(f"**{flops / us / 1e3:.0f}**")
            print(f"| {rows} | all (GFLOP/s) | {' | '.join(rates)} |")


if __name__ == "__main__":
    main()
