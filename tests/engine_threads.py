"""Engines on threads of the test process, on the real wire: the Python twin of
rust/engine-client/src/fake.rs.

Each engine is what ``python -m engine --headless`` runs (engine/process/handshake.py's
``serve_engine``: HELLO, INIT, the backend, READY, then engine/process/core.py's
EngineCore), on a thread, with its own ZMQ context; the launcher's ``join_engines`` binds
the handshake on ipc:// in the temp dir and runs the handshake with it, as for engine
processes. The backend is the one the engine config asks for: the mock engine
(engine/mock/, ``"mock": true``; scripted tokens through ``mock_replies``).
``start_engine_threads`` is a ``server.lifecycle.serve`` engine starter
(tests/server/server_kit.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import zmq

from engine import protocol as p
from engine.process.handshake import serve_engine
from engine.process.launcher import join_engines

logger = logging.getLogger("vrs.tests")


class EngineThreads:
    """Engines on threads (engine/process/launcher.py's ``Engines``), stopped together."""

    def __init__(self) -> None:
        self.readies: dict[int, p.Ready] = {}
        self.exit_codes: dict[int, int] = {}  # of those that stopped on their own
        self._threads: dict[int, threading.Thread] = {}
        self._contexts: list[zmq.Context[zmq.Socket[bytes]]] = []
        self._stop = threading.Event()

    def launch(self, handshake_address: str, index: int) -> None:
        """Start engine ``index``, which joins the launcher at ``handshake_address``."""
        ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
        self._contexts.append(ctx)
        thread = threading.Thread(target=self._run, args=(ctx, handshake_address, index),
                                  name=f"vrs-engine-{index}", daemon=True)
        self._threads[index] = thread
        thread.start()

    def _run(self, ctx: zmq.Context[zmq.Socket[bytes]], handshake_address: str,
             index: int) -> None:
        try:
            code = serve_engine(ctx, handshake_address, index, self._stop)
        except BaseException:  # what would end the process: the thread's exit code 1
            logger.exception("engine %d (thread): fatal error", index)
            code = 1
        if not self._stop.is_set():
            self.exit_codes[index] = code

    def exited(self) -> tuple[int, int] | None:
        return next(iter(list(self.exit_codes.items())), None)

    def stop(self, grace_s: float = 5.0) -> None:
        """Stop every engine, wait up to ``grace_s`` each, close their sockets."""
        self._stop.set()
        for index, thread in self._threads.items():
            thread.join(grace_s)
            if thread.is_alive():
                logger.warning("engine %d (thread) still runs after %.0f s", index, grace_s)
        for ctx in self._contexts:
            ctx.destroy(linger=0)


def start_engine_threads(engine_config: dict[str, Any], input_address: str,
                         output_address: str, count: int = 1) -> EngineThreads:
    """``count`` engines on threads, joined through the handshake; returns them ready."""
    threads = EngineThreads()
    return join_engines(threads, threads.launch, engine_config, input_address, output_address,
                        range(count))
