"""The Python launcher side of the handshake: start engines, hand them INIT, wait READY.

Used by the Python frontend (``vrs serve --frontend python``) and by ``vrs frontend``
(Python binds, starts engines, then hands the sockets to vrs-rs). vrs-rs has its own
copy of this logic in Rust for ``vrs serve``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import zmq

from engine import protocol as p
from engine.process.handshake import ready_timeout_s

logger = logging.getLogger("vrs.launcher")


class EngineStartError(RuntimeError):
    """An engine failed to start, exited early, or missed the ready timeout."""


class Engines(Protocol):
    """Engines that passed the handshake (their READY messages by index), as their
    frontend watches and stops them: an EngineGroup of processes, or engines on threads of
    the test process (tests/engine_threads.py)."""

    readies: dict[int, p.Ready]

    def exited(self) -> tuple[int, int] | None:
        """(engine_index, exit code) of an engine that has stopped on its own, if any."""
        ...

    def stop(self, grace_s: float = 5.0) -> None: ...


StartedEngines = TypeVar("StartedEngines", bound=Engines)


@dataclass
class EngineGroup:
    """Engines this process started (and their READY messages), stopped together."""

    processes: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    readies: dict[int, p.Ready] = field(default_factory=dict)

    def pids(self) -> list[int]:
        return [proc.pid for proc in self.processes.values()]

    def exited(self) -> tuple[int, int] | None:
        """(engine_index, returncode) of an engine that has exited, if any."""
        for index, proc in self.processes.items():
            code = proc.poll()
            if code is not None:
                return index, code
        return None

    def wait_any_exit(self, timeout: float | None = None) -> tuple[int, int] | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            gone = self.exited()
            if gone is not None:
                return gone
            time.sleep(0.05)
        return None

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM every engine's process group, SIGKILL what is left after ``grace_s``."""
        _signal_groups(self.processes.values(), signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        _signal_groups(self.processes.values(), signal.SIGKILL)
        for proc in self.processes.values():
            proc.wait()


def _signal_groups(processes: Any, sig: int) -> None:
    for proc in processes:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass


def engine_command(python: str, handshake_address: str, engine_index: int) -> list[str]:
    return [python, "-m", "engine", "--headless", "--handshake-address", handshake_address,
            "--engine-index", str(engine_index)]


def start_engines(
    engine_config: dict[str, Any],
    input_address: str,
    output_address: str,
    count: int = 1,
    start_index: int = 0,
    python: str = sys.executable,
    handshake_address: str | None = None,
    remote: int = 0,
) -> EngineGroup:
    """Start ``count`` engines (indices start_index..), run the handshake, return them ready.

    ``remote`` more engines (the indices after those) are started elsewhere and join at
    ``handshake_address`` (tcp://); the handshake waits for them too.

    Each engine runs in its own session (process group) so that signals to the
    frontend's terminal do not reach it and it can be stopped as a group. On any failure
    every engine started here is stopped before the error is raised.
    """
    group = EngineGroup()

    def launch(address: str, index: int) -> None:
        group.processes[index] = subprocess.Popen(
            engine_command(python, address, index), start_new_session=True
        )

    return join_engines(group, launch, engine_config, input_address, output_address,
                        range(start_index, start_index + count), handshake_address, remote)


def join_engines(
    engines: StartedEngines,
    launch: Callable[[str, int], None],
    engine_config: dict[str, Any],
    input_address: str,
    output_address: str,
    indices: range,
    handshake_address: str | None = None,
    remote: int = 0,
) -> StartedEngines:
    """Bind the handshake ROUTER (at ``handshake_address``, else ipc:// in a private temp
    dir), ``launch(address, index)`` each engine of ``indices`` (into ``engines``), run the
    handshake with them and ``remote`` more, return ``engines`` ready. On any failure
    ``engines`` are stopped before the error is raised."""
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    tmpdir = None
    if handshake_address is None:
        tmpdir = tempfile.mkdtemp(prefix="vrs-hs-")
        handshake_address = f"ipc://{tmpdir}/handshake"
    router.bind(handshake_address)
    try:
        for index in indices:
            launch(handshake_address, index)
        expected = range(indices.start, indices.stop + remote)
        _handshake(router, engines, engine_config, input_address, output_address, expected)
    except BaseException:
        engines.stop(grace_s=2.0)
        raise
    finally:
        router.close(linger=0)
        if tmpdir is not None:
            for name in os.listdir(tmpdir):
                os.unlink(os.path.join(tmpdir, name))
            os.rmdir(tmpdir)
    return engines


def _handshake(router: zmq.Socket[bytes], group: Engines, engine_config: dict[str, Any],
               input_address: str, output_address: str, expected: range) -> None:
    timeout = ready_timeout_s()
    deadline = time.monotonic() + timeout
    init = p.encode(p.Init(input_address=input_address, output_address=output_address,
                           engine_config=engine_config))
    while set(expected) - set(group.readies):
        gone = group.exited()
        # What it said last (a FAILED) is worth more than its exit code.
        if gone is not None and not router.poll(200):
            raise EngineStartError(f"engine {gone[0]} exited with code {gone[1]} during startup")
        if time.monotonic() > deadline:
            missing = ", ".join(str(i) for i in sorted(set(expected) - set(group.readies)))
            raise EngineStartError(
                f"engine(s) {missing} of {len(expected)} not ready within {timeout:.0f} s "
                "(VRS_ENGINE_READY_TIMEOUT_S; a remote engine joins with `vrs serve MODEL "
                "--headless --handshake-address ... --engine-index I`)"
            )
        if not router.poll(100):
            continue
        identity, kind, body = router.recv_multipart()
        if kind[0] == p.HandshakeKind.HELLO:
            hello = p.HELLO_DECODER.decode(body)
            if hello.protocol_version != p.PROTOCOL_VERSION:
                raise EngineStartError(
                    f"engine {hello.engine_index} speaks protocol v{hello.protocol_version}; "
                    f"this frontend speaks v{p.PROTOCOL_VERSION}"
                )
            router.send_multipart([identity, bytes([p.HandshakeKind.INIT]), init])
        elif kind[0] == p.HandshakeKind.READY:
            ready = p.READY_DECODER.decode(body)
            group.readies[ready.engine_index] = ready
            logger.info("engine %d ready: %s, max_model_len %d%s", ready.engine_index,
                        ready.model_name, ready.max_model_len, " (mock)" if ready.is_mock else "")
        elif kind[0] == p.HandshakeKind.FAILED:
            failed = p.FAILED_DECODER.decode(body)
            raise EngineStartError(f"engine {failed.engine_index} failed to start: "
                                   f"{failed.message}")
        else:
            raise EngineStartError(f"unexpected handshake message kind {kind[0]:#x}")
