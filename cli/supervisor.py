"""`vrs frontend`: Python binds the sockets, starts the engines, supervises vrs-rs.

Bind first, hand over second (docs/internals.md, "Processes"): the HTTP listening socket
and the ZMQ input and output listeners are bound here as plain sockets, the engines are started and
handshaken, then ``vrs-rs frontend`` inherits the three fds (``pass_fds``) and adopts
them. Connections that arrive before vrs-rs is up wait in the kernel's listen queue.
Once vrs-rs runs, this process holds none of the sockets (no port is bound twice).

Supervision: the first process to die takes the group down.
* vrs-rs exits (any code, 0 included) -> the engines are stopped, exit with its code
  (128 + N when a signal N killed it, as a shell reports it);
* an engine exits -> vrs-rs is stopped, exit 1;
* SIGINT/SIGTERM -> passed on to vrs-rs as received (it drains; a second signal makes it
  stop at once), then the engines are stopped. During engine start-up a signal stops
  the engines and exits 0.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from cli.launch import cli_log, rust_argv
from engine.process.launcher import EngineGroup, start_engines
from server.edge.listener import ListenError, bind_unix, remove_socket_file

ENGINE_STOP_GRACE_S = 5.0
# vrs-rs gets --shutdown-timeout to drain, plus this, before it is killed.
CHILD_STOP_GRACE_S = 10.0
_PR_SET_PDEATHSIG = 1


class FrontendStartError(RuntimeError):
    """A socket could not be bound or vrs-rs could not be started."""


class _Interrupted(BaseException):
    """SIGINT/SIGTERM while the engines were starting."""


@dataclass
class Listeners:
    """The three sockets vrs-rs adopts, bound here."""

    http: socket.socket
    input: socket.socket
    output: socket.socket
    input_address: str
    output_address: str

    def fds(self) -> tuple[int, int, int]:
        return self.http.fileno(), self.input.fileno(), self.output.fileno()

    def close(self) -> None:
        for sock in (self.http, self.input, self.output):
            sock.close()


def _unix_listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        sock.listen(256)
    except OSError:
        sock.close()
        raise
    return sock


def bind_http(host: str, port: int) -> socket.socket:
    """The HTTP listening socket (IPv4 or IPv6, whichever ``host`` resolves to first)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise FrontendStartError(f"cannot bind http://{host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(4096)
    except OSError as exc:
        sock.close()
        raise FrontendStartError(f"cannot bind http://{host}:{port}: {exc}") from None
    return sock


def _tcp_listener(host: str) -> tuple[socket.socket, str]:
    """A listening TCP socket on a free port of ``host`` and its tcp:// address."""
    sock = bind_http(host, 0)
    bound_host, port = sock.getsockname()[:2]
    if ":" in bound_host:  # IPv6
        bound_host = f"[{bound_host}]"
    return sock, f"tcp://{bound_host}:{port}"


def bind_listeners(host: str, port: int, directory: Path,
                   engine_host: str | None = None, uds: str | None = None) -> Listeners:
    """HTTP (TCP, or the Unix socket ``uds``) and the ZMQ input/output listeners: ipc://
    sockets in ``directory``, or tcp:// on free ports of ``engine_host`` when engines join
    from other hosts."""
    if uds is not None:
        try:
            http = bind_unix(uds)
        except ListenError as exc:
            raise FrontendStartError(str(exc)) from None
    else:
        http = bind_http(host, port)
    if engine_host is not None:
        try:
            (input_sock, input_address), (output_sock, output_address) = (
                _tcp_listener(engine_host), _tcp_listener(engine_host))
        except FrontendStartError:
            http.close()
            raise
        return Listeners(http=http, input=input_sock, output=output_sock,
                         input_address=input_address, output_address=output_address)
    input_path, output_path = directory / "input", directory / "output"
    try:
        input_sock = _unix_listener(input_path)
    except OSError as exc:
        http.close()
        raise FrontendStartError(f"cannot bind {input_path}: {exc}") from None
    try:
        output_sock = _unix_listener(output_path)
    except OSError as exc:
        http.close()
        input_sock.close()
        raise FrontendStartError(f"cannot bind {output_path}: {exc}") from None
    return Listeners(http=http, input=input_sock, output=output_sock,
                     input_address=f"ipc://{input_path}", output_address=f"ipc://{output_path}")


def _prctl() -> Any:
    """libc's prctl, resolved in the parent (a forked child should not dlopen)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _child_setup(parent: int, prctl: Any) -> None:
    """In the child before exec: SIGTERM when this supervisor dies (Linux prctl)."""
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os._exit(1)


def frontend_argv(binary: Path, listeners: Listeners, args: dict[str, Any],
                  engine_count: int, data_parallel_size: int) -> list[str]:
    http_fd, input_fd, output_fd = listeners.fds()
    base = rust_argv(binary, "frontend", args)
    flags = ["--listen-fd", str(http_fd), "--input-listener-fd", str(input_fd),
             "--output-listener-fd", str(output_fd),
             "--input-address", listeners.input_address,
             "--output-address", listeners.output_address,
             "--engine-start-index", "0", "--engine-count", str(engine_count),
             "--data-parallel-size", str(data_parallel_size)]
    return base[:2] + flags + base[2:]


def exit_code(returncode: int) -> int:
    """A child's exit code as a shell reports it (128 + N when signal N killed it)."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    """Owns the engines and the vrs-rs child; ``run`` returns the exit code."""

    def __init__(self, binary: Path, args: dict[str, Any], data_parallel_size: int,
                 console: Console) -> None:
        self.binary = binary
        self.args = args
        self.data_parallel_size = data_parallel_size
        self.console = console
        self._signals: list[int] = []
        self._raise_on_signal = False

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if self._raise_on_signal:
            self._raise_on_signal = False
            raise _Interrupted(signal.Signals(signum).name)
        self._signals.append(signum)

    def run(self) -> int:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # engines fork
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        directory = Path(tempfile.mkdtemp(prefix="vrs-frontend-"))
        try:
            return self._run(directory)
        except _Interrupted as exc:
            cli_log().info("%s during engine start-up: stopped", exc)
            return 0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            shutil.rmtree(directory, ignore_errors=True)

    def _run(self, directory: Path) -> int:
        local = self.args.get("data_parallel_size_local")
        local = self.data_parallel_size if local is None else local
        remote = self.data_parallel_size - local
        engine_host = self.args.get("data_parallel_address") or "127.0.0.1"
        uds = (self.args.get("http") or {}).get("uds")
        listeners = bind_listeners(self.args["host"], self.args["port"], directory,
                                   engine_host if remote else None, uds)
        # vrs-rs serves the adopted socket; the file is removed here at exit, whoever
        # ends first (only while it is still ours).
        inode = os.stat(uds).st_ino if uds is not None else None
        try:
            return self._start(listeners, local, engine_host)
        finally:
            remove_socket_file(uds, inode)

    def _start(self, listeners: Listeners, local: int, engine_host: str) -> int:
        remote = self.data_parallel_size - local
        handshake_address = None
        if remote:
            rpc_port = self.args.get("data_parallel_rpc_port") or 29550
            handshake_address = f"tcp://{engine_host}:{rpc_port}"
            cli_log().info("waiting for engines %d..%d to join: vrs serve MODEL --headless "
                           "--handshake-address %s --engine-index I", local,
                           self.data_parallel_size, handshake_address)
        engines: EngineGroup | None = None
        try:
            with self.console.status(f"starting {self.data_parallel_size} engine(s)…"):
                if self._signals:
                    raise _Interrupted(signal.Signals(self._signals[0]).name)
                self._raise_on_signal = True
                engines = start_engines(self.args["engine_config"], listeners.input_address,
                                        listeners.output_address, count=local,
                                        python=self.args["python_executable"],
                                        handshake_address=handshake_address, remote=remote)
                self._raise_on_signal = False
            argv = frontend_argv(self.binary, listeners, self.args, self.data_parallel_size,
                                 self.data_parallel_size)
            # vrs-rs logs its own command line, once (rust/cli/src/frontend.rs).
            try:
                # Own process group: a terminal's Ctrl-C reaches only this supervisor,
                # which passes it on as itself (one signal, one drain).
                child = subprocess.Popen(argv, pass_fds=listeners.fds(), process_group=0,
                                         preexec_fn=functools.partial(
                                             _child_setup, os.getpid(), _prctl()))
            except OSError as exc:
                raise FrontendStartError(f"cannot start {self.binary}: {exc}") from None
            listeners.close()  # the child holds them now; no port stays bound twice
            return self._supervise(child, engines)
        finally:
            self._raise_on_signal = False
            listeners.close()
            if engines is not None:
                engines.stop(grace_s=ENGINE_STOP_GRACE_S)

    def _supervise(self, child: subprocess.Popen[bytes], engines: EngineGroup) -> int:
        forwarded = 0
        kill_at: float | None = None
        while True:
            code = child.poll()
            if code is not None:
                if code != 0:
                    cli_log().error("vrs-rs exited with code %d", exit_code(code))
                return exit_code(code)
            gone = engines.exited()
            if gone is not None:
                index, engine_code = gone
                cli_log().error("engine %d exited with code %s; stopping the frontend", index,
                                engine_code)
                _stop_child(child, grace_s=CHILD_STOP_GRACE_S)
                return 1
            while forwarded < len(self._signals):
                # The signal as received: vrs-rs logs a Ctrl-C as SIGINT, a kill as SIGTERM.
                child.send_signal(self._signals[forwarded])
                forwarded += 1
                if kill_at is None:
                    kill_at = (time.monotonic() + float(self.args["shutdown_timeout"])
                               + CHILD_STOP_GRACE_S)
            if kill_at is not None and time.monotonic() > kill_at:
                name = signal.Signals(self._signals[0]).name
                cli_log().error("vrs-rs did not stop after %s; killing it", name)
                child.kill()
                kill_at = float("inf")
            time.sleep(0.05)


def _stop_child(child: subprocess.Popen[bytes], grace_s: float) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def warn_api_server_count(count: int, console: Console) -> None:
    if count > 1:
        cli_log().warning("--api-server-count %d ignored: the Rust frontend is multi-threaded, "
                          "one process serves all cores; using 1", count)
