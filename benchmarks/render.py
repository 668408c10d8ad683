"""Render only (template + tokenize): `vrs render` Rust against Python, measured with oha.

Starts ``vrs render`` (Rust) and ``vrs render --frontend python`` on loopback for the
built-in demo model (its tokenizer and template; no weights, no engine), checks that both
give the same prompt token ids for the three bodies, then for each body (``short``,
``long``, ``tools`` from ``tests/render_corpus/requests.jsonl``), each concurrency and
each frontend in turn: ``oha`` warm-up requests, then measured requests, all of which must
answer 200. After the load the ids are compared once more. Writes
``benchmarks/results/render.{json,md}`` with req/s, p50/p99 latency and the Rust/Python
ratios (with ``--rounds`` > 1, the median over rounds, frontends taking turns).

    python benchmarks/render.py                               # 300 warm-up + 3000, c = 1, 16
    python benchmarks/render.py --requests 500 --warmup 50    # a quick look

Needs ``oha`` on PATH (``cargo install oha``) and vrs-rs (``pip install .``, or
VRS_RUST_FRONTEND_PATH pointing at a release build).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from servers import REPO_ROOT, RESULTS, Server  # noqa: E402

CORPUS = REPO_ROOT / "tests" / "render_corpus" / "requests.jsonl"
BODIES = ("short", "long", "tools")
FRONTENDS = ("rust", "python")
PATH = "/v1/chat/completions/render"


class RenderServer(Server):
    """`vrs render [--frontend python]` for the demo model."""

    def __init__(self, frontend: str, log_dir: Path) -> None:
        self.frontend = frontend
        super().__init__(("render", "--frontend", frontend, "--served-model-name", "demo",
                          "--log-level", "warning"), log_dir / f"render-{frontend}.log",
                         f"{frontend} render", timeout_s=120, poll_s=0.2)

    def ids(self, body: bytes) -> list[int]:
        response = httpx.post(self.url + PATH, content=body, timeout=30,
                              headers={"content-type": "application/json"})
        if response.status_code != 200:
            raise RuntimeError(f"{self.frontend}: {response.status_code} {response.text}")
        return response.json()["prompt_token_ids"]


def oha(url: str, body_file: Path, requests: int, concurrency: int) -> dict[str, Any]:
    """One oha run; raises unless every response was a 200."""
    out = subprocess.run(
        ["oha", "-n", str(requests), "-c", str(concurrency), "-m", "POST",
         "-H", "content-type: application/json", "-D", str(body_file), "--no-tui",
         "--output-format", "json", url + PATH],
        capture_output=True, text=True, check=True, timeout=3600)
    result = json.loads(out.stdout)
    codes = result.get("statusCodeDistribution") or {}
    if codes != {"200": requests} or result.get("errorDistribution"):
        raise RuntimeError(f"not all 200: {codes} {result.get('errorDistribution')}")
    pct = result["latencyPercentiles"]
    return {"req_per_s": result["summary"]["requestsPerSec"],
            "p50_ms": pct["p50"] * 1000, "p99_ms": pct["p99"] * 1000}


def load_bodies(tmp: Path) -> dict[str, Path]:
    entries = {json.loads(line)["name"]: json.loads(line) for line in
               CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()}
    files = {}
    for name in BODIES:
        path = tmp / f"{name}.json"
        path.write_text(json.dumps(entries[name]["body"], ensure_ascii=False), encoding="utf-8")
        files[name] = path
    return files


def check_ids(servers: dict[str, RenderServer], files: dict[str, Path]) -> dict[str, int]:
    """Prompt length per body, after checking the frontends agree on the ids."""
    lengths = {}
    for name, path in files.items():
        ids = {f: s.ids(path.read_bytes()) for f, s in servers.items()}
        if ids["rust"] != ids["python"]:
            raise RuntimeError(f"{name}: the frontends disagree on the token ids")
        lengths[name] = len(ids["rust"])
    return lengths


def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="vrs-render-bench-"))
    files = load_bodies(tmp)
    servers: dict[str, RenderServer] = {}
    try:
        for frontend in FRONTENDS:
            servers[frontend] = RenderServer(frontend, tmp)
        lengths = check_ids(servers, files)
        cells: list[dict[str, Any]] = []
        for name in BODIES:
            for concurrency in args.concurrency:
                runs: dict[str, list[dict[str, Any]]] = {f: [] for f in FRONTENDS}
                for _ in range(args.rounds):
                    for frontend in FRONTENDS:
                        url = servers[frontend].url
                        if args.warmup:
                            oha(url, files[name], args.warmup, concurrency)
                        runs[frontend].append(oha(url, files[name], args.requests, concurrency))
                        print(f"{name} c={concurrency} {frontend}: {runs[frontend][-1]}",
                              file=sys.stderr)
                cell = {"body": name, "prompt_tokens": lengths[name],
                        "body_bytes": files[name].stat().st_size, "concurrency": concurrency}
                for frontend in FRONTENDS:
                    cell[frontend] = {k: statistics.median(r[k] for r in runs[frontend])
                                      for k in ("req_per_s", "p50_ms", "p99_ms")}
                cell["ratio"] = cell["rust"]["req_per_s"] / cell["python"]["req_per_s"]
                cells.append(cell)
        if check_ids(servers, files) != lengths:
            raise RuntimeError("prompt lengths changed under load")
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    oha_version = subprocess.run(["oha", "--version"], capture_output=True, text=True).stdout
    return {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version(), "oha": oha_version.strip()},
            "warmup": args.warmup, "requests": args.requests, "rounds": args.rounds,
            "ids_match": True, "cells": cells}


def markdown(result: dict[str, Any]) -> str:
    lines = ["| body | prompt tokens | c | Rust req/s | Python req/s | Rust / Python | "
             "Rust p50 / p99 (ms) | Python p50 / p99 (ms) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in result["cells"]:
        rust, python = c["rust"], c["python"]
        lines.append(
            f"| {c['body']} ({c['body_bytes'] / 1024:.1f} KB) | {c['prompt_tokens']} | "
            f"{c['concurrency']} | {rust['req_per_s']:.0f} | {python['req_per_s']:.0f} | "
            f"**{c['ratio']:.1f}×** | {rust['p50_ms']:.2f} / {rust['p99_ms']:.2f} | "
            f"{python['p50_ms']:.2f} / {python['p99_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000, help="measured requests per run")
    parser.add_argument("--warmup", type=int, default=300, help="warm-up requests per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--rounds", type=int, default=1, help="runs per cell (median)")
    parser.add_argument("--out", type=Path, default=RESULTS / "render.json")
    args = parser.parse_args()
    if shutil.which("oha") is None:
        print("oha not found on PATH: cargo install oha", file=sys.stderr)
        return 1
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    table = markdown(result)
    args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
