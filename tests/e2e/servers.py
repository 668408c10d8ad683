"""Starting and watching the three frontends for the end-to-end suite.

A mode is how a server is run:
* ``rust-serve``: ``vrs serve --mock`` (vrs-rs binds, spawns and supervises the engine);
* ``rust-frontend``: ``vrs frontend --mock`` (Python binds, starts the engine, runs vrs-rs
  on the inherited sockets and supervises both);
* ``python``: ``vrs serve --mock --frontend python`` (the uvicorn baseline).

``MODES`` are the three, ``ROUTE_MODES`` the two the request suites run in (see there).

``Server`` starts one through the real CLI (``launch="cli"``) or, for settings the CLI does
not expose (another engine interpreter, engine values the CLI refuses), from an
args-json document (``direct_args(**direct)``) straight to the process the CLI would
start (``launch="direct"``).
vrs-rs is found like the CLI finds it (``VRS_RUST_FRONTEND_PATH``, else next to the
interpreter), else in ``$CARGO_TARGET_DIR`` or ``rust/target`` (release, then debug).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.processes import terminate

ROOT = Path(__file__).resolve().parents[2]
MODEL = "demo"
MAX_MODEL_LEN = 2048
MODES = ("rust-serve", "rust-frontend", "python")
# The modes of the request suites (a request's answer, the real engine's output): `vrs
# frontend` runs the same vrs-rs HTTP service, on the same args-json
# (cli/serve_args.py builds it for both), as `vrs serve`; the two differ only in who binds
# the sockets, starts the engines and supervises them. So rust-frontend runs in the suites
# where that launch path matters (lifecycle, startup, frontend, first_screen,
# data_parallel, scaleout, model_flags) and in the parity suites (test_parity: the same
# bodies from all three modes, plain and feature servers; test_vllm_metrics;
# test_real_engine: one real-engine check), not in every request suite a third time.
ROUTE_MODES = ("rust-serve", "python")
# The real engine in the e2e suite: KV blocks of 4 tokens, prefill chunks of 32 tokens,
# float32 (what the parity checks against transformers' fp32 need; dtype auto is bf16 on
# a CPU with native bf16, fp32 on one without, and the suite must pass on both).
PREFILL_BUDGET = 32
REAL_ENGINE_ARGS = ("--block-size", "4", "--max-num-batched-tokens", str(PREFILL_BUDGET),
                    "--device", "cpu", "--dtype", "float32")
CLI = "from cli.main import main; main()"
DIRECT_FRONTEND = """
import json, sys
from rich.console import Console
from cli.binary import find_rust_frontend
from cli.supervisor import Supervisor
try:
    code = Supervisor(find_rust_frontend(), json.loads(sys.argv[1]), 1, Console(stderr=True)).run()
except RuntimeError as exc:
    print(f"error: {exc}", file=sys.stderr)
    code = 1
sys.exit(code)
"""


def rust_binary() -> Path:
    """The vrs-rs the tests run (see the module docstring)."""
    from cli.binary import BinaryNotFoundError, find_rust_frontend

    try:
        return find_rust_frontend()
    except BinaryNotFoundError as exc:
        if os.environ.get("VRS_RUST_FRONTEND_PATH", "auto").strip() not in ("", "auto"):
            raise
        missing = str(exc)
    targets = [Path(os.environ["CARGO_TARGET_DIR"])] if os.environ.get("CARGO_TARGET_DIR") else []
    targets.append(ROOT / "rust" / "target")
    for target in targets:
        for profile in ("release", "debug"):
            if (target / profile / "vrs-rs").is_file():
                return target / profile / "vrs-rs"
    raise AssertionError(f"{missing}\nBuild it: cd rust && cargo build --release -p vrs-rs")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def alive(pid: int) -> bool:
    """Running (not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except FileNotFoundError:
            continue
        for kid in kids:
            found += [kid, *descendants(kid)] if alive(kid) else []
    return found


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [part.decode(errors="replace") for part in fh.read().split(b"\0") if part]
    except FileNotFoundError:
        return []


def process_groups(pids: list[int]) -> set[int]:
    groups = set()
    for pid in pids:
        try:
            groups.add(os.getpgid(pid))
        except ProcessLookupError:
            pass
    return groups


def group_members(groups: set[int]) -> list[int]:
    """Live processes in any of the process groups ``groups``."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if fields[0] != "Z" and int(fields[2]) in groups:
                members.append(int(entry))
    return members


def direct_args(model_dir: Path, port: int, *, python: str = sys.executable,
                shutdown_timeout: float = 20.0, http: dict[str, Any] | None = None,
                **engine: Any) -> dict[str, Any]:
    """The args-json document `vrs serve` would build, with the mock engine (and ``http``,
    the listener's settings, when given)."""
    return {**({"http": http} if http is not None else {}),
        "model": str(model_dir), "served_model_name": MODEL, "host": "127.0.0.1",
        "port": port, "log_level": "debug", "shutdown_timeout": shutdown_timeout,
        "python_executable": python, "chat_template": None,
        "engine_config": {"model": str(model_dir), "served_model_name": MODEL, "mock": True,
                          "max_model_len": MAX_MODEL_LEN, "log_level": "debug", **engine},
    }


class Server:
    """One server in ``mode`` on a free loopback port, its output in ``log_path``."""

    def __init__(self, mode: str, model_dir: Path, log_path: Path, *, launch: str = "cli",
                 wait: bool = True, cli_args: tuple[str, ...] = (),
                 direct: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                 port: int | None = None, max_model_len: int | None = MAX_MODEL_LEN,
                 engine_count: int = 1, mock: bool = True, model_flag: bool = False,
                 uds: Path | None = None, tls: ssl.SSLContext | None = None) -> None:
        """``uds``: it serves on that Unix socket (``--uds``, given here); ``tls``: it
        serves HTTPS (its flags in ``cli_args``), reached with this client context."""
        assert mode in MODES, mode
        self.mode = mode
        self.engine_count = engine_count  # engines started with it (its process tree)
        self.port = port or free_port()
        self.uds = uds
        self.tls = tls
        host = "localhost" if uds else "127.0.0.1"  # a Unix socket: any host will do
        self.url = f"{'https' if tls else 'http'}://{host}:{self.port}"
        if uds is not None:
            cli_args = (*cli_args, "--uds", str(uds))
        self.log_path = log_path
        binary = str(rust_binary())
        python_path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        full_env = {**os.environ, "PYTHONPATH": python_path, "VRS_RUST_FRONTEND_PATH": binary,
                    "COLUMNS": "400", **(env or {})}
        if launch == "cli":
            command = [sys.executable, "-c", CLI, "frontend" if mode == "rust-frontend" else
                       "serve", *(["--model"] if model_flag else []), str(model_dir),
                       *(["--mock"] if mock else []), "--host",
                       "127.0.0.1", "--port", str(self.port), "--served-model-name", MODEL,
                       "--log-level", "debug", *cli_args]
            if max_model_len is not None:
                command += ["--max-model-len", str(max_model_len)]
            if mode == "python":
                command += ["--frontend", "python"]
        else:
            document = json.dumps(direct_args(model_dir, self.port, **(direct or {})))
            command = {
                "rust-serve": [binary, "serve", "--args-json", document],
                "rust-frontend": [sys.executable, "-c", DIRECT_FRONTEND, document],
                "python": [sys.executable, "-m", "server", "--args-json", document],
            }[mode]
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(command, cwd=ROOT, env=full_env, stdout=self._log,
                                     stderr=subprocess.STDOUT)
        self.seen: set[int] = set()  # every process of the server ever observed
        self.groups: set[int] = set()  # and their process groups (but the test's own)
        if wait:
            self.wait_ready()

    # ----------------------------------------------------------------- processes

    def tree(self) -> list[int]:
        """The server's live processes (itself first), remembered for ``leftovers``."""
        pids = [self.proc.pid, *descendants(self.proc.pid)] if alive(self.proc.pid) else []
        self.seen.update(pids)
        self.groups.update(process_groups(pids) - {os.getpgid(0)})
        return pids

    def engines(self) -> list[int]:
        return [pid for pid in self.tree() if "engine" in cmdline(pid)[1:3]]

    def rust_child(self) -> int | None:
        """`vrs frontend`'s vrs-rs process."""
        kids = [pid for pid in self.tree()[1:] if cmdline(pid)[1:2] == ["frontend"]]
        return kids[0] if kids else None

    def leftovers(self) -> list[int]:
        """Processes of the server (or in their process groups) still running."""
        self.tree()
        return sorted({pid for pid in self.seen if alive(pid)} | set(group_members(self.groups)))

    def assert_all_gone(self, timeout: float = 10.0) -> None:
        assert wait_until(lambda: not self.leftovers(), timeout), (
            f"left behind: {[(pid, cmdline(pid)) for pid in self.leftovers()]}\n{self.log()}")

    # ----------------------------------------------------------------- lifecycle

    def wait_ready(self, timeout: float = 120.0) -> None:
        def healthy() -> bool:
            assert self.proc.poll() is None, f"{self.mode} exited early:\n{self.log()}"
            try:
                with self.http(timeout=5) as http:
                    return http.get(f"{self.url}/health").status_code == 200
            except httpx.HTTPError:
                return False

        assert wait_until(healthy, timeout, step=0.1), f"not healthy:\n{self.log()}"
        expected = (2 if self.mode == "rust-frontend" else 1) + self.engine_count
        assert wait_until(lambda: len(self.tree()) == expected, 10), (
            f"{self.mode}: expected {expected} processes, got "
            f"{[cmdline(pid)[:3] for pid in self.tree()]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def http(self, timeout: float = 60) -> httpx.Client:
        """An httpx client that reaches the server (its Unix socket, its CA)."""
        verify: ssl.SSLContext | bool = self.tls or True
        transport = httpx.HTTPTransport(uds=str(self.uds), verify=verify) if self.uds else None
        return httpx.Client(transport=transport, verify=verify, timeout=timeout)

    def client(self, timeout: float = 60) -> openai.OpenAI:
        http = self.http(timeout) if self.uds or self.tls else None
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key="unused", max_retries=0,
                             timeout=timeout, http_client=http)

    def signal(self, sig: int) -> None:
        self.tree()
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"still running after {timeout} s:\n{self.log()}") from None

    def stop(self) -> int:
        """SIGTERM, wait, then kill whatever of the group is left; returns the exit code."""
        self.tree()
        terminate(self.proc)
        wait_until(lambda: not self.leftovers(), 10)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._log.close()
        return self.proc.returncode


class Pool:
    """One long-lived server per mode, shared by every test that only sends requests."""

    def __init__(self, model: Path, directory: Path) -> None:
        self.model = model
        self.directory = directory
        self.servers: dict[str, Server] = {}

    def get(self, mode: str) -> Server:
        if mode not in self.servers:
            self.servers[mode] = Server(mode, self.model, self.directory / f"{mode}.log",
                                        cli_args=("--mock-step-delay-ms", "1"))
        return self.servers[mode]

    def close(self) -> None:
        failures = []
        for mode, server in self.servers.items():
            server.signal(signal.SIGTERM)
            code = server.stop()
            if code != 0 or server.leftovers():
                failures.append(f"{mode}: exit {code}, left {server.leftovers()}\n{server.log()}")
        assert not failures, "\n".join(failures)


def sse_events(lines: Iterator[str]) -> list[Any]:
    """The JSON payloads of an SSE body up to ``[DONE]`` (which must end it)."""
    events: list[Any] = []
    for line in lines:
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line.removeprefix("data: ")
        if data == "[DONE]":
            return events
        events.append(json.loads(data))
    raise AssertionError(f"the stream ended without [DONE] after {events[-1:]}")
