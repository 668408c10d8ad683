"""The frontends `frontend_overhead.py` measures, and how one run against one is made.

A frontend is ``vrs serve --mock`` with the Rust frontend (vrs-rs; any build of it, by
path) or with ``--frontend python`` (the uvicorn baseline), the mock engine flat out or
paced (``--mock-step-delay-ms``: one token per running request per step). A run is one
``vrs bench serve`` against it, with the CPU seconds the frontend process alone spent
meanwhile, read from ``/proc`` (vrs-rs is exec'ed by ``vrs serve``, and the Python
frontend runs in the ``vrs`` process, so the server's pid is the frontend's; its engine
is a child process and not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servers import REPO_ROOT, Server, vrs


@dataclass(frozen=True)
class Frontend:
    """``label``: how tables name it; ``kind``: ``rust`` or ``python``; ``binary``: the
    vrs-rs to run (None: the one ``vrs`` finds by itself); ``tree``: the source tree whose
    ``vrs`` runs (None: this checkout), e.g. another commit's Python frontend."""

    label: str
    kind: str
    binary: Path | None = None
    tree: Path | None = None


def python_trees(specs: list[str], taken: list[str]) -> list[Frontend]:
    """The Python frontends of other checkouts: each ``LABEL=PATH`` (a source tree, e.g.
    a ``git worktree`` of another commit)."""
    found: list[Frontend] = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not label or not path:
            raise SystemExit(f"--python-tree {spec!r}: expected LABEL=PATH")
        tree = Path(path).resolve()
        if not (tree / "server" / "__init__.py").is_file():
            raise SystemExit(f"--python-tree {spec!r}: {tree} is not a vrs source tree "
                             "(no server/__init__.py)")
        if label in taken or any(f.label == label for f in found):
            raise SystemExit(f"--python-tree {spec!r}: label {label!r} is taken")
        found.append(Frontend(label, "python", tree=tree))
    return found


def frontends(rust_binaries: list[str], python: bool,
              trees: list[str] | None = None) -> list[Frontend]:
    """``rust`` (and ``python``), or the given Rust builds: each ``LABEL=PATH``; then the
    Python frontends of other source trees (``trees``: each ``LABEL=PATH``)."""
    if not rust_binaries:
        found = [Frontend("rust", "rust")]
    else:
        found = []
        for spec in rust_binaries:
            label, sep, path = spec.partition("=")
            if not sep or not label or not path:
                raise SystemExit(f"--rust-binary {spec!r}: expected LABEL=PATH")
            binary = Path(path).resolve()
            if not (binary.is_file() and os.access(binary, os.X_OK)):
                raise SystemExit(f"--rust-binary {spec!r}: {binary} is not an executable")
            if label == "python" or any(f.label == label for f in found):
                raise SystemExit(f"--rust-binary {spec!r}: label {label!r} is taken")
            found.append(Frontend(label, "rust", binary))
    found = [*found, Frontend("python", "python")] if python else found
    return [*found, *python_trees(trees or [], [f.label for f in found])]


class FrontendServer(Server):
    """`vrs serve --mock [--frontend python] [--mock-step-delay-ms STEP]`."""

    def __init__(self, frontend: Frontend, log_dir: Path, step_ms: float = 0.0) -> None:
        self.frontend = frontend.label
        # The mock runs at most --max-num-seqs at once (as a real engine): room for c = 512,
        # so that the frontend, not the engine's queue, is what is measured.
        args = ["serve", "--mock", "--frontend", frontend.kind, "--max-num-seqs", "1024",
                "--log-level", "warning"]
        if step_ms:
            args += ["--mock-step-delay-ms", f"{step_ms:g}"]
        env = {"VRS_RUST_FRONTEND_PATH": str(frontend.binary)} if frontend.binary else None
        super().__init__(args, log_dir / f"{frontend.label}.log", f"{frontend.label} frontend",
                         env=env, **({"tree": frontend.tree} if frontend.tree else {}))


def bench(server: FrontendServer, concurrency: int, args: argparse.Namespace, out: Path,
          backend: str | None = None) -> dict:
    """One `vrs bench serve` run (``backend``: its API, default completions); the result
    file's keys plus ``frontend_cpu_s``, the frontend's CPU seconds meanwhile, and
    ``frontend_requests``, the requests it served (the warm-up ones included)."""
    prompts = max(args.min_prompts, args.prompts_per_slot * concurrency)
    warmup = min(concurrency, 64)
    cmd = vrs("bench", "serve", "--base-url", server.url, "--num-prompts", str(prompts),
              "--max-concurrency", str(concurrency), "--random-input-len", str(args.input_len),
              "--random-output-len", str(args.output_len), "--ignore-eos",
              "--warmup-requests", str(warmup), "--seed", str(args.seed),
              "--metric-percentiles", "50,99", "--result-file", str(out),
              "--label", f"{server.frontend}-c{concurrency}",
              *(("--backend", backend) if backend else ()))
    cpu = cpu_seconds(server.proc.pid)
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    cpu = cpu_seconds(server.proc.pid) - cpu
    if done.returncode != 0:
        raise RuntimeError(f"bench failed ({server.frontend}, c={concurrency}): "
                           f"{done.stderr.strip() or done.stdout[-2000:]}")
    result = json.loads(out.read_text())
    result["frontend_cpu_s"] = cpu
    result["frontend_requests"] = result["completed"] + result["failed"] + warmup
    return result


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process, all its threads (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids = [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            continue
        for kid in kids:
            found += [kid, *descendants(kid)]
    return found


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT,
                            capture_output=True, text=True).stdout.strip()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "commit": commit or None, "load_1min": load}
