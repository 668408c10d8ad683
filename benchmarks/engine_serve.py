"""The served contender: `vrs serve MODEL` (its default frontend, and the default dtype
unless asked), driven by `vrs bench serve` on /v1/completions: random prompts of an exact
token length, greedy (the load generator's temperature 0), ``--ignore-eos`` so every
request makes exactly ``output_len`` tokens (checked from the usage), all requests at
once up to the concurrency.

Every run has its own prompt seed and no warm-up requests of its own, so no measured
prompt is in the prefix cache (which stays on, as by default) but for the load
generator's one probe request, the run's first prompt sent once before the measured ones.
The server is warmed once at start by a run of other prompts.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from servers import Server, bench_serve

ROUTE = "/v1/completions"


class ServedEngine:
    """A `vrs serve` of ``model_dir`` on a free port, warmed up, with its dtype read from
    the engine's start-up log."""

    def __init__(self, model_dir: Path, work: Path, args: argparse.Namespace,
                 attention: str = "auto", model_impl: str = "auto",
                 tensor_parallel_size: int = 1) -> None:
        self.args = args
        self.work = work / f"serve-{attention}-{model_impl}-tp{tensor_parallel_size}"
        self.work.mkdir(parents=True, exist_ok=True)
        serve = ["serve", str(model_dir), "--device", args.device,
                 "--max-model-len", str(args.input_len + args.output_len + 64),
                 "--model-impl", model_impl,
                 "--tensor-parallel-size", str(tensor_parallel_size)]
        if args.serve_dtype != "auto":
            serve += ["--dtype", args.serve_dtype]
        self.log = self.work / "vrs-serve.log"
        self.server = Server(serve, self.log, "vrs serve", stop_session=True,
                             env={"VRS_ATTENTION": attention})
        self.runs = 0
        self.bench(seed=args.seed + 10_000, label="warm-up")
        self.dtype = self._dtype()

    def _dtype(self) -> str:
        found = re.findall(r" as (float32|bfloat16|float16)\b", self.log.read_text("utf-8",
                                                                                "replace"))
        return found[-1] if found else "unknown"

    def bench(self, seed: int, label: str = "vrs-serve") -> dict[str, Any]:
        a = self.args
        load = argparse.Namespace(input_len=a.input_len, output_len=a.output_len,
                                  concurrency=a.concurrency, prompts=a.num_requests, seed=seed)
        self.runs += 1
        out = self.work / f"vrs-serve-{self.runs}.json"
        return bench_serve(self.server, "openai", ROUTE, label, load, out,
                           extra=["--ignore-eos"], warmup=0)

    def run(self, round_index: int) -> dict[str, Any]:
        result = self.bench(seed=self.args.seed + 1 + round_index)
        duration = result["duration"]
        return {"elapsed_s": duration, "output_tokens": result["total_output_tokens"],
                "input_tokens": result["total_input_tokens"],
                "requests": result["completed"],
                "output_tokens_per_s": result["total_output_tokens"] / duration,
                "ttft_p50_ms": result["median_ttft_ms"], "ttft_p99_ms": result["p99_ttft_ms"],
                "failed": result["failed"], "dtype": self.dtype}

    def stop(self) -> None:
        self.server.stop()
