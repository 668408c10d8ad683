"""The pure parts of benchmarks/llamacpp.py: the build cache's key, one `vrs bench serve`
result cut to the numbers the comparison reports, CPU time of a process session read
from /proc, the medians over rounds and the markdown table. No network, no building."""

from __future__ import annotations

import hashlib
import os
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

# The numbers a cell holds, from one `vrs bench serve` result (vLLM's key names) plus
# the server's CPU: (key in a row, heading, decimals).
METRICS: tuple[tuple[str, str, int], ...] = (
    ("output_tok_s", "output tok/s", 1),
    ("tpot_p50_ms", "TPOT p50 ms", 2),
    ("ttft_p50_ms", "TTFT p50 ms", 1),
    ("itl_p50_ms", "ITL p50 ms", 2),
    ("cpu_ms_per_token", "server CPU ms / out token", 3),
)


def cpu_key(cpuinfo: str) -> str:
    """12 hex digits naming this CPU's model and instruction-set flags (the first
    processor of a /proc/cpuinfo text): a GGML_NATIVE build runs only where they match."""
    model = flags = ""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        name = name.strip()
        if name == "model name" and not model:
            model = value.strip()
        elif name == "flags" and not flags:
            flags = " ".join(sorted(value.split()))
    if not flags:
        raise ValueError("no 'flags' line in the CPU description (is /proc/cpuinfo readable?)")
    return hashlib.sha256(f"{model}\n{flags}".encode()).hexdigest()[:12]


def build_key(version: str, cpuinfo: str) -> str:
    """The build cache's key: the llama-cpp-python version and the CPU (cpu_key)."""
    return f"{version}-{cpu_key(cpuinfo)}"


def cpu_summary(cpuinfo: str) -> dict[str, Any]:
    """The CPU's model name and which of the SIMD extensions ggml uses it has."""
    model, flags = "unknown", set[str]()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "model name":
            model = value.strip()
        elif name.strip() == "flags":
            flags = set(value.split())
            break
    simd = [f for f in ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16", "amx_tile")
            if f in flags]
    return {"model": model, "simd": simd, "avx2_only": "avx2" in flags
            and "avx512f" not in flags}


def session_cpu_s(session: int, proc: Path = Path("/proc")) -> float:
    """User + system CPU seconds so far of the live processes of session ``session`` (a
    server started with start_new_session leads its own: the server and every child it
    started, e.g. vrs serve's frontend and engine)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        # after the command: state, ppid, pgrp, session (3), ..., utime (11), stime (12)
        if int(fields[3]) == session:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def vrs_variant(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME:VAR=VALUE[,VAR=VALUE...]`` (``--vrs-env``) as the name and its variables."""
    name, sep, assignments = spec.partition(":")
    env: dict[str, str] = {}
    for item in assignments.split(",") if assignments else ():
        var, eq, value = item.partition("=")
        if not eq or not var.strip():
            raise ValueError(f"--vrs-env {spec!r}: {item!r} is not VAR=VALUE")
        env[var.strip()] = value
    if not sep or not name.strip() or not env:
        raise ValueError(f"--vrs-env {spec!r}: expected NAME:VAR=VALUE[,VAR=VALUE]")
    return name.strip(), env


def cell(result: Mapping[str, Any], cpu_s: float, output_len: int) -> dict[str, float]:
    """One run's numbers from its `vrs bench serve` result and the server's CPU seconds
    over the run. The run sent its requests plus the load generator's probe (the first
    prompt, once, with the same max_tokens), so the CPU is divided by all their tokens."""
    tokens = (result["completed"] + 1) * output_len
    return {
        "output_tok_s": float(result["output_throughput"]),
        "tpot_p50_ms": float(result["median_tpot_ms"]),
        "ttft_p50_ms": float(result["median_ttft_ms"]),
        "itl_p50_ms": float(result["median_itl_ms"]),
        "cpu_ms_per_token": cpu_s * 1e3 / tokens,
    }


def medians(rounds: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The median of each metric over the rounds."""
    if not rounds:
        raise ValueError("no rounds to summarise")
    return {key: statistics.median(r[key] for r in rounds) for key, _, _ in METRICS}


def summarise(runs: Iterable[Mapping[str, Any]], baseline: str) -> list[dict[str, Any]]:
    """Rows (one per contender and concurrency, in first-seen order) from per-round runs
    ({"contender", "concurrency", "round", "cell"}): the medians, the rounds' output
    tok/s, and each metric's ratio to ``baseline`` at the same concurrency."""
    grouped: dict[tuple[str, int], list[Mapping[str, float]]] = {}
    for run in runs:
        grouped.setdefault((run["contender"], int(run["concurrency"])), []).append(run["cell"])
    rows: list[dict[str, Any]] = [{"contender": name, "concurrency": conc, **medians(cells),
             "rounds_tok_s": [round(c["output_tok_s"], 1) for c in cells]}
            for (name, conc), cells in grouped.items()]
    base: dict[int, dict[str, Any]] = {
        row["concurrency"]: row for row in rows if row["contender"] == baseline}
    for row in rows:
        ref = base.get(row["concurrency"])
        row["ratio"] = ({key: row[key] / ref[key] if ref[key] else None
                         for key, _, _ in METRICS} if ref else None)
    return rows


def markdown(rows: Sequence[Mapping[str, Any]], baseline: str) -> str:
    """The table: one line per contender and concurrency, then the ratios of vrs rows to
    ``baseline`` (vrs / baseline; above 1 is better for tok/s, worse for the others)."""
    head = "| contender | concurrency | " + " | ".join(h for _, h, _ in METRICS)
    lines = [head + " | rounds (tok/s) |",
             "|---|---:|" + "---:|" * len(METRICS) + "---|"]
    for row in rows:
        values = " | ".join(f"{row[k]:.{d}f}" for k, _, d in METRICS)
        rounds = ", ".join(f"{v:g}" for v in row["rounds_tok_s"])
        lines.append(f"| {row['contender']} | {row['concurrency']} | {values} | {rounds} |")
    ratios = [row for row in rows if row["contender"].startswith("vrs") and row["ratio"]]
    if ratios:
        lines += ["", f"| vrs / {baseline} | concurrency | "
                  + " | ".join(h for _, h, _ in METRICS) + " |",
                  "|---|---:|" + "---:|" * len(METRICS)]
        for row in ratios:
            values = " | ".join("n/a" if row["ratio"][k] is None else f"{row['ratio'][k]:.2f}x"
                                for k, _, _ in METRICS)
            lines.append(f"| {row['contender']} | {row['concurrency']} | {values} |")
    return "\n".join(lines) + "\n"


def parity_line(name: str, equal: int, total: int) -> str:
    return f"{name}: {equal} / {total} equal"
