"""Starting a frontend with the vLLM-wire mock engine behind it, in issue #33's ways in.

A ``Combo`` is (frontend, way):

* frontends: ``vllm-rs`` (the Rust frontend in the vllm 0.33.0 wheel: the reference),
  ``vrs-rs`` (``$VRS_RUST_FRONTEND_PATH``, else vrs-rs beside this interpreter, else
  ``$CARGO_TARGET_DIR`` / ``rust/target`` release) and ``vllm`` (vLLM's Python frontend,
  way 3 only: proof of the mock itself);
* way 1: ``VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=<bin> vllm serve MODEL
  --data-parallel-size-local 0 ...``: vLLM's supervisor owns the handshake, the mock joins
  it as a remote headless engine and the Rust frontend serves on the inherited sockets;
* way 2: ``vrs-rs serve MODEL --engine vllm --vllm-engine-command "<py> mock_engine.py .."``:
  vrs-rs launches the mock where vLLM's headless engine would be (README, "vLLM's engines
  behind vrs-rs");
* way 3: ``<frontend> serve MODEL [--engine vllm] --data-parallel-size-local 0
  --data-parallel-address 127.0.0.1 --data-parallel-rpc-port P``: the mock joins from outside.

vLLM and the mock run with ``VLLM_TARGET_DEVICE=cpu``: vLLM's CLI will not import on a
host without an accelerator otherwise, and neither the frontends nor the mock need one.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MOCK = HERE / "mock_engine.py"
VLLM_PYTHON = Path(
    os.environ.get("VRS_VLLM_PYTHON", Path.home() / ".cache/vrs-vllm-venv/bin/python"))
# The mock's pace: slow enough that a 2000-token stream outlives a client's disconnect.
MOCK_ARGS = ("--step-ms", "5", "--log-requests", "--vocab-size", "32000", "--seed", "0")
READY_TIMEOUT_S = 420.0


@dataclass(frozen=True)
class Combo:
    frontend: str
    way: int

    @property
    def id(self) -> str:
        return f"{self.frontend}-way{self.way}"


COMBOS = (Combo("vllm-rs", 1), Combo("vllm-rs", 3), Combo("vllm", 3),
          Combo("vrs-rs", 1), Combo("vrs-rs", 2), Combo("vrs-rs", 3))


def vllm_rs_binary() -> Path | None:
    """The vllm-rs binary shipped inside the vllm wheel of the vLLM venv."""
    found = sorted(VLLM_PYTHON.parent.parent.glob("lib/python3*/site-packages/vllm/vllm-rs"))
    return found[0] if found else None


def vrs_rs_binary() -> Path | None:
    explicit = os.environ.get("VRS_RUST_FRONTEND_PATH", "").strip()
    if explicit and explicit != "auto":
        return Path(explicit) if Path(explicit).exists() else None
    candidates = [Path(sys.executable).parent / "vrs-rs"]
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append(Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "vrs-rs")
    candidates.append(ROOT / "rust" / "target" / "release" / "vrs-rs")
    return next((c for c in candidates if c.exists()), None)


def frontend_binary(frontend: str) -> Path | None:
    if frontend == "vllm":
        vllm = VLLM_PYTHON.parent / "vllm"
        return vllm if vllm.exists() else None
    return vllm_rs_binary() if frontend == "vllm-rs" else vrs_rs_binary()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Live:
    """A running frontend with the mock behind it."""

    combo: Combo
    url: str
    model: str
    frontend: subprocess.Popen
    mock: subprocess.Popen | None
    frontend_log: Path
    mock_log: Path

    def mock_lines(self) -> list[str]:
        """The mock's log lines so far (``vllm-mock:`` lines only)."""
        text = self.mock_log.read_text(errors="replace") if self.mock_log.exists() else ""
        return [line for line in text.splitlines() if "vllm-mock:" in line]

    def logs(self) -> str:
        parts = [f"--- frontend log {self.frontend_log}:\n"
                 + self.frontend_log.read_text(errors="replace")[-6000:]]
        if self.mock_log != self.frontend_log and self.mock_log.exists():
            parts.append(f"--- mock log {self.mock_log}:\n"
                         + self.mock_log.read_text(errors="replace")[-4000:])
        return "\n".join(parts)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(VLLM_TARGET_DEVICE="cpu", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               VLLM_ENGINE_READY_TIMEOUT_S=str(int(READY_TIMEOUT_S)),
               PYTHONUNBUFFERED="1")
    return env


def _commands(combo: Combo, binary: Path, model: str, port: int, rpc: int,
              mock_args: tuple[str, ...], frontend_args: tuple[str, ...]
              ) -> tuple[list[str], list[str] | None, dict[str, str]]:
    """(frontend argv, mock argv or None when the frontend launches it, extra env)."""
    mock = [str(VLLM_PYTHON), str(MOCK), *MOCK_ARGS, *mock_args]
    join = [*mock, "--handshake-address", f"tcp://127.0.0.1:{rpc}"]
    remote = ["--data-parallel-size-local", "0", "--data-parallel-address", "127.0.0.1",
              "--data-parallel-rpc-port", str(rpc), *frontend_args]
    vllm_serve = [str(VLLM_PYTHON.parent / "vllm"), "serve", model, *remote,
                  "--host", "127.0.0.1", "--port", str(port),
                  "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    if combo.way == 1:
        return vllm_serve, join, {"VLLM_USE_RUST_FRONTEND": "1",
                                  "VLLM_RUST_FRONTEND_PATH": str(binary)}
    if combo.frontend == "vllm":
        return vllm_serve, join, {}
    if combo.way == 2:
        return ([str(binary), "serve", model, "--engine", "vllm",
                 "--vllm-engine-command", shlex.join(mock), "--host", "127.0.0.1",
                 "--port", str(port), "--tool-call-parser", "hermes", *frontend_args],
                None, {})
    engine = ["--engine", "vllm"] if combo.frontend == "vrs-rs" else []
    return ([str(binary), "serve", model, *engine, *remote, "--host", "127.0.0.1",
             "--port", str(port), "--tool-call-parser", "hermes"], join, {})


def start(combo: Combo, binary: Path, model: str, log_dir: Path,
          mock_args: tuple[str, ...] = (), frontend_args: tuple[str, ...] = ()) -> Live:
    """Start the frontend and the mock (both at once: the mock waits for the handshake)
    and wait until ``/health`` answers 200; fails with both logs otherwise."""
    port, rpc = free_port(), free_port()
    frontend_cmd, mock_cmd, extra = _commands(combo, binary, model, port, rpc, mock_args,
                                                  frontend_args)
    env = {**_env(), **extra}
    log_dir.mkdir(parents=True, exist_ok=True)
    frontend_log = log_dir / f"{combo.id}-frontend.log"
    mock_log = log_dir / f"{combo.id}-mock.log" if mock_cmd else frontend_log
    with frontend_log.open("wb") as out:
        frontend = subprocess.Popen(frontend_cmd, stdout=out, stderr=subprocess.STDOUT,
                                    env=env, cwd=ROOT, start_new_session=True)
    mock = None
    if mock_cmd:
        with mock_log.open("wb") as out:
            mock = subprocess.Popen(mock_cmd, stdout=out, stderr=subprocess.STDOUT, env=env,
                                    cwd=ROOT, start_new_session=True)
    live = Live(combo, f"http://127.0.0.1:{port}", model, frontend, mock, frontend_log,
                mock_log)
    try:
        _wait_healthy(live)
    except BaseException:
        stop(live)
        raise
    return live


def _wait_healthy(live: Live) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        for name, proc in (("frontend", live.frontend), ("mock engine", live.mock)):
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"{live.combo.id}: the {name} exited ({proc.returncode}) "
                                     f"before the server was healthy\n{live.logs()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{live.combo.id}: {live.url}/health not 200 in "
                                 f"{READY_TIMEOUT_S:g} s\n{live.logs()}")
        try:
            if httpx.get(f"{live.url}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)


def _stop_group(proc: subprocess.Popen | None, timeout: float = 30.0) -> None:
    """SIGTERM the process group this suite started, then SIGKILL it if it lingers."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    try:  # children the leader left behind (vllm serve's API server, vrs-rs's engine)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop(live: Live) -> None:
    _stop_group(live.frontend)
    _stop_group(live.mock)
