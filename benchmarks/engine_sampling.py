"""Sampling at vocabulary scale: this checkout's sampler against an earlier one's.

Times ``Sampler.__call__`` on ``--rows`` rows of logits over ``--vocab`` entries (default
64 x 129280, the demo model's vocabulary) for each case below, the two samplers taking
turns within every round (``--rounds``, medians reported). The earlier sampler is
``engine/runtime/sampler.py`` at ``--baseline`` (default d2e2112, before top-k/top-p
stopped sorting the vocabulary), loaded from git beside this one.

Two logit shapes: ``flat`` (N(0, 0.1^2): a random-weight model, where top_p=0.9 needs
about 90 % of the vocabulary) and ``peaked`` (N(0, 4^2): a trained model's sharper
distribution, where it needs a small part).

    python benchmarks/engine_sampling.py
    python benchmarks/engine_sampling.py --rounds 9 --threads 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import REPO_ROOT, RESULTS  # noqa: E402

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from engine import protocol as p  # noqa: E402
from engine.runtime.request import Request  # noqa: E402
from engine.runtime.sampler import Sampler  # noqa: E402

CASES: dict[str, dict[str, Any]] = {
    "greedy": dict(temperature=0.0),
    "greedy, logprobs=5": dict(temperature=0.0, logprobs=5),
    "temperature only": dict(temperature=1.0),
    "top_k=50": dict(temperature=1.0, top_k=50),
    "top_p=0.9": dict(temperature=1.0, top_p=0.9),
    "top_k=50, top_p=0.9": dict(temperature=1.0, top_k=50, top_p=0.9),
    "top_p=0.9, logprobs=5": dict(temperature=1.0, top_p=0.9, logprobs=5),
}
SCALES = {"flat": 0.1, "peaked": 4.0}


def baseline_sampler(rev: str, work: Path) -> type:
    """The ``Sampler`` class of ``engine/runtime/sampler.py`` at git revision ``rev``."""
    source = subprocess.run(["git", "show", f"{rev}:engine/runtime/sampler.py"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout
    path = work / "baseline_sampler.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_sampler", path)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.Sampler


def requests_for(params: dict[str, Any], rows: int) -> list[Request]:
    sp = p.SamplingParams(max_tokens=16, **params)
    return [Request(str(i), [0], sp, 0.0, frozenset()) for i in range(rows)]


def seconds(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=129280)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default="d2e2112", help="git revision of the baseline")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--output", type=Path, default=RESULTS / "engine_sampling.json")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        samplers = {"before": baseline_sampler(args.baseline, Path(tmp))(args.vocab, 0, "cpu"),
                    "after": Sampler(args.vocab, 0, torch.device("cpu"))}
    generator = torch.Generator().manual_seed(0)
    rows = []
    for shape, scale in SCALES.items():
        logits = torch.randn(args.rows, args.vocab, generator=generator) * scale
        for case, params in CASES.items():
            times: dict[str, list[float]] = {name: [] for name in samplers}
            for rnd in range(args.rounds + 1):  # round 0 warms up
                order = list(samplers.items())[:: 1 if rnd % 2 else -1]
                for name, sampler in order:
                    batch = requests_for(params, args.rows)
                    took = seconds(lambda s=sampler, b=batch, x=logits: s(x, b))
                    if rnd:
                        times[name].append(took)
            before, after = (1e3 * statistics.median(times[n]) for n in ("before", "after"))
            rows.append({"logits": shape, "case": case, "before_ms": before,
                         "after_ms": after, "speedup": before / after})
            print(f"{shape:<6} {case:<24} before {before:8.1f} ms  after {after:8.1f} ms  "
                  f"x{before / after:.1f}", file=sys.stderr, flush=True)
    lines = [f"{args.rows} rows x {args.vocab} vocabulary, median of {args.rounds} rounds, "
             f"{torch.get_num_threads()} torch threads, baseline {args.baseline}", "",
             "| logits | case | before (ms) | after (ms) | speed-up |",
             "|---|---|---:|---:|---:|"]
    lines += [f"| {r['logits']} | {r['case']} | {r['before_ms']:.1f} | {r['after_ms']:.1f} | "
              f"{r['speedup']:.1f}x |" for r in rows]
    table = "\n".join(lines)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"command": "python benchmarks/engine_sampling.py "
                                       + " ".join(sys.argv[1:]), "rows": rows}, indent=2) + "\n")
    args.output.with_suffix(".md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
