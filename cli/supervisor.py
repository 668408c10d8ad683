"""`vrs frontend`: Python binds the sockets, starts the engines, supervises vrs-rs.

Bind first, hand over second (design §2): the HTTP listening socket and the ZMQ input
and output listeners are bound here as plain sockets, the engines are started and
handshaken, then ``vrs-rs frontend`` inherits the three fds (``pass_fds``) and adopts
them. Connections that arrive before vrs-rs is up wait in the kernel's listen queue.

Supervision: the first process to die takes the group down.
* vrs-rs exits (any code, 0 included) -> the engines are stopped, exit with its code;
* an engine exits -> vrs-rs is stopped, exit non-zero;
* SIGINT/SIGTERM -> passed on to vrs-rs (it drains), then the engines are stopped.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shlex
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from cli.launch import redact, rust_argv
from engine.launcher import EngineGroup, start_engines

logger = logging.getLogger("vrs.frontend")

ENGINE_STOP_GRACE_S = 5.0
_PR_SET_PDEATHSIG = 1


@dataclass
class Listeners:
    """The three sockets vrs-rs adopts, bound here."""

    http: socket.socket
    input: socket.socket
    output: socket.socket
    input_address: str
    output_address: str
    directory: Path

    def fds(self) -> tuple[int, int, int]:
        return self.http.fileno(), self.input.fileno(), self.output.fileno()

    def close(self) -> None:
        for sock in (self.http, self.input, self.output):
            sock.close()


def _unix_listener(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    sock.listen(256)
    return sock


def bind_listeners(host: str, port: int) -> Listeners:
    """HTTP (TCP) and the ZMQ input/output listeners (ipc:// in a private temp dir)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    http = socket.create_server((host, port), family=family, backlog=4096, reuse_port=False)
    directory = Path(tempfile.mkdtemp(prefix="vrs-frontend-"))
    input_path, output_path = directory / "input", directory / "output"
    return Listeners(http=http, input=_unix_listener(input_path),
                     output=_unix_listener(output_path),
                     input_address=f"ipc://{input_path}", output_address=f"ipc://{output_path}",
                     directory=directory)


def _die_with_parent() -> None:
    """In the child: receive SIGTERM if this supervisor dies (Linux prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):
        pass


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


class Supervisor:
    """Owns the engines and the vrs-rs child; ``run`` returns the exit code."""

    def __init__(self, binary: Path, args: dict[str, Any], data_parallel_size: int,
                 console: Console) -> None:
        self.binary = binary
        self.args = args
        self.data_parallel_size = data_parallel_size
        self.console = console
        self._signalled: int | None = None

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self._signalled = signum

    def run(self) -> int:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # engines fork
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._on_signal)
        listeners = bind_listeners(self.args["host"], self.args["port"])
        engines: EngineGroup | None = None
        try:
            with self.console.status(f"starting {self.data_parallel_size} engine(s)…"):
                engines = start_engines(self.args["engine_config"], listeners.input_address,
                                        listeners.output_address,
                                        count=self.data_parallel_size,
                                        python=self.args["python_executable"])
            argv = frontend_argv(self.binary, listeners, self.args, self.data_parallel_size,
                                 self.data_parallel_size)
            logger.info("starting vrs-rs: %s", shlex.join(redact(argv)))
            self.console.print(f"[dim]starting {shlex.join(redact(argv[:-2]))} --args-json …"
                               "[/dim]")
            # Own process group: a terminal's Ctrl-C reaches only this supervisor, which
            # passes it on as SIGTERM (one signal, one drain).
            child = subprocess.Popen(argv, pass_fds=listeners.fds(), process_group=0,
                                     preexec_fn=_die_with_parent)
            listeners.close()  # the child holds them now; no port stays bound twice
            return self._supervise(child, engines)
        finally:
            listeners.close()
            if engines is not None:
                engines.stop(grace_s=ENGINE_STOP_GRACE_S)
            for leftover in listeners.directory.iterdir():
                leftover.unlink(missing_ok=True)
            listeners.directory.rmdir()

    def _supervise(self, child: subprocess.Popen, engines: EngineGroup) -> int:
        forwarded = False
        while True:
            code = child.poll()
            if code is not None:
                if code != 0:
                    self.console.print(f"[red]vrs-rs exited with code {code}[/red]")
                return code
            gone = engines.exited()
            if gone is not None:
                index, engine_code = gone
                self.console.print(f"[bold red]error:[/bold red] engine {index} exited with "
                                   f"code {engine_code}; stopping the frontend")
                _stop_child(child, grace_s=ENGINE_STOP_GRACE_S)
                return 1
            if self._signalled is not None and not forwarded:
                child.send_signal(signal.SIGTERM)
                forwarded = True
            time.sleep(0.05)


def _stop_child(child: subprocess.Popen, grace_s: float) -> None:
    if child.poll() is None:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def warn_api_server_count(count: int, console: Console) -> None:
    if count > 1:
        console.print(f"[yellow]warning:[/yellow] --api-server-count {count} ignored: the Rust "
                      "frontend is multi-threaded, one process serves all cores; using 1.")
