"""The servers the benchmarks measure: a `vrs` command (`serve`, `render`) started in its own
session on a free loopback port, waited on until `GET /health` answers 200, and stopped
(SIGTERM, then SIGKILL of its session after 30 s). Shared by the scripts in benchmarks/.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "benchmarks" / "results"


def vrs(*args: str) -> list[str]:
    """The argv running the `vrs` CLI of this checkout with `args`."""
    return [sys.executable, "-c", "from cli.main import main; main()", *args]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_healthy(proc: subprocess.Popen[bytes], url: str, name: str, log: Path,
                 timeout_s: float, poll_s: float = 0.3,
                 verify: ssl.SSLContext | bool = True) -> bool:
    """Whether ``GET url/health`` answered 200 within ``timeout_s``; raises if ``proc``
    (``name``, writing to ``log``) exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited; see {log}")
        try:
            if httpx.get(f"{url}/health", timeout=5, verify=verify).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(poll_s)
    return False


class Server:
    """`vrs ARGS --port P` in its own session (P a free port), healthy once constructed.

    ``name`` is how errors call it; its output goes to ``log``. ``stop_session`` sends the
    SIGTERM to the whole session (the server and its engine at once) instead of the server
    alone. ``ca_cert``: the server speaks HTTPS (its certificate signed by that CA).
    ``env``: variables set for the server on top of this process's (e.g.
    ``VRS_RUST_FRONTEND_PATH``, to run another build of vrs-rs). ``tree``: the source tree
    whose ``vrs`` runs (default this checkout; another one runs its own Python code)."""

    def __init__(self, args: Sequence[str], log: Path, name: str, *,
                 timeout_s: float = 300.0, poll_s: float = 0.3,
                 stop_session: bool = False, ca_cert: Path | None = None,
                 env: Mapping[str, str] | None = None, tree: Path = REPO_ROOT) -> None:
        self.name = name
        self.log_path = log
        self.port = free_port()
        self.url = f"{'https' if ca_cert else 'http'}://127.0.0.1:{self.port}"
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=str(ca_cert)) if ca_cert else True)
        self._stop_session = stop_session
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                vrs(*args, "--port", str(self.port)), cwd=tree, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(tree),
                     "TOKENIZERS_PARALLELISM": "false", **(env or {})})
        if not wait_healthy(self.proc, self.url, name, log, timeout_s, poll_s, verify):
            self.stop()
            raise RuntimeError(f"{name} not healthy in {timeout_s:g} s; see {log}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            if self._stop_session:
                os.killpg(self.proc.pid, signal.SIGTERM)
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def frontend_cpu_s(self) -> float:
        """User + system CPU seconds so far of the server's processes (its session) other
        than the engine's (``python -m engine`` and its tensor-parallel workers)."""
        tick = os.sysconf("SC_CLK_TCK")
        total = 0.0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            # fields[3]: the session id (the server leads its own session); the engine is
            # `python -m engine`, and its tensor-parallel workers `-m engine.runtime...`.
            if int(fields[3]) != self.proc.pid or any(
                    part == b"engine" or part.startswith(b"engine.") for part in cmdline[1:3]):
                continue
            total += (int(fields[11]) + int(fields[12])) / tick
        return total


def bench_serve(server: Server, backend: str, route: str, label: str, args: Any, out: Path,
                extra: Sequence[str] = (), warmup: int | None = None) -> dict[str, Any]:
    """One `vrs bench serve` run against ``server`` (random prompts of ``args.input_len``
    tokens, ``args.output_len`` out, ``args.concurrency`` at once, ``args.prompts`` measured
    after ``warmup`` warm-up requests: by default as many as the concurrency, at most 64;
    they repeat the measured prompts, which a prefix cache then holds), its result file
    read back. Raises unless it measured ``route`` and every request made exactly
    ``args.output_len`` tokens by the API's own usage (the same load on every server).
    Adds ``frontend_requests`` (warm-up included: all went through the frontend) and
    ``frontend_cpu_ms_per_request`` (the server's CPU but the engine's, from /proc)."""
    import json

    warmup = min(args.concurrency, 64) if warmup is None else warmup
    cmd = vrs("bench", "serve", "--base-url", server.url, "--backend", backend,
              "--num-prompts", str(args.prompts), "--max-concurrency", str(args.concurrency),
              "--random-input-len", str(args.input_len),
              "--random-output-len", str(args.output_len),
              "--warmup-requests", str(warmup), "--seed", str(args.seed),
              "--metric-percentiles", "50,99", "--result-file", str(out),
              "--label", label, *extra)
    cpu = server.frontend_cpu_s()
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    cpu = server.frontend_cpu_s() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"bench failed ({label}): "
                           f"{done.stderr.strip() or done.stdout[-2000:]}")
    result = json.loads(out.read_text())
    if result["endpoint"] != route:
        raise RuntimeError(f"{label}: measured {result['endpoint']}, not {route}")
    expected = result["completed"] * args.output_len
    if result["total_output_tokens"] != expected:
        raise RuntimeError(f"{label}: {result['total_output_tokens']} output tokens by the "
                           f"usage, not {expected}: not the same load")
    requests = result["completed"] + result["failed"] + warmup
    result["frontend_requests"] = requests
    result["frontend_cpu_ms_per_request"] = cpu * 1e3 / requests
    return result
