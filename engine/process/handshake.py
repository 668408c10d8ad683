"""The engine side of startup: HELLO -> INIT -> build backend -> READY (or FAILED) -> serve.

Run by ``python -m engine --headless``. The launcher (vrs-rs, or engine.launcher in
Python) owns the handshake ROUTER; this process connects a DEALER to it.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time

import zmq

from engine import protocol as p
from engine.config import EngineConfig, config_from_map
from engine.process.core import EngineBackend, EngineCore

logger = logging.getLogger("vrs.engine")

DEFAULT_READY_TIMEOUT_S = 600.0


def ready_timeout_s() -> float:
    """``VRS_ENGINE_READY_TIMEOUT_S`` (default 600): the bound on each handshake stage."""
    raw = os.environ.get("VRS_ENGINE_READY_TIMEOUT_S", "")
    try:
        return float(raw) if raw else DEFAULT_READY_TIMEOUT_S
    except ValueError:
        logger.warning("ignoring VRS_ENGINE_READY_TIMEOUT_S=%r: not a number", raw)
        return DEFAULT_READY_TIMEOUT_S


def build_backend(config: EngineConfig) -> tuple[EngineBackend, p.Ready]:
    """The mock or the real engine, as the config asks; returns it with its READY info."""
    if config.mock:
        from engine.mock.engine import MockEngine

        mock = MockEngine.from_config(config)
        return mock, mock.ready(0)
    from engine.runtime.pooling.encoder import is_encoder_model

    if is_encoder_model(config.model):  # BERT, XLM-RoBERTa, ModernBERT: pooling only
        from engine.runtime.pooling.encoder_engine import EncoderEngine

        encoder = EncoderEngine.from_config(config)
        return encoder, encoder.ready(0)
    from engine.runtime.engine import ModelEngine

    real = ModelEngine.from_config(config)
    return real, real.ready(0)


def _watch_parent(parent_pid: int) -> None:
    """Exit when the process that started us is gone: an engine never outlives its frontend."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            logger.error("engine: parent process %d exited; shutting down", parent_pid)
            os._exit(1)


def _watch_frontend(
    sock: zmq.Socket[bytes], engine_index: int, address: str, stop: threading.Event
) -> None:
    """A remote engine (tcp://) is not the frontend's child: it stops when the frontend's
    connection closes (or stops answering heartbeats) after having been established."""
    sock.setsockopt(zmq.HEARTBEAT_IVL, 5000)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 15000)
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED)

    def watch() -> None:
        from zmq.utils.monitor import recv_monitor_message

        connected = False
        while not stop.is_set():
            event = recv_monitor_message(monitor)["event"]
            if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                connected = True
            elif event == zmq.EVENT_DISCONNECTED and connected:
                logger.error(
                    "engine %d: the frontend at %s went away; shutting down", engine_index, address
                )
                stop.set()
                return

    threading.Thread(target=watch, daemon=True, name="vrs-frontend-watch").start()


def run_headless(handshake_address: str, engine_index: int) -> int:
    """Serve as engine ``engine_index`` until told to stop; returns the exit code."""
    threading.Thread(
        target=_watch_parent, args=(os.getppid(),), daemon=True, name="vrs-parent-watch"
    ).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    # The input thread may still block in recv when serve_engine returns: the context is
    # left alone and the caller exits the process (engine.__main__ uses os._exit).
    return serve_engine(zmq.Context(), handshake_address, engine_index, stop)


def serve_engine(ctx: zmq.Context[zmq.Socket[bytes]], handshake_address: str,
                 engine_index: int, stop: threading.Event) -> int:
    """Join the launcher at ``handshake_address`` as engine ``engine_index`` (HELLO, INIT,
    READY or FAILED), then serve until ``stop`` is set; returns the exit code. Its sockets
    are ``ctx``'s: the caller owns the context (run_headless's process exits; an engine on
    a thread of the tests, tests/engine_threads.py, destroys it)."""
    identity = p.engine_identity(engine_index)
    handshake = ctx.socket(zmq.DEALER)
    handshake.setsockopt(zmq.IDENTITY, identity)
    handshake.setsockopt(zmq.LINGER, 2000)
    handshake.connect(handshake_address)
    hello = p.Hello(protocol_version=p.PROTOCOL_VERSION, engine_index=engine_index, pid=os.getpid())
    handshake.send_multipart([bytes([p.HandshakeKind.HELLO]), p.encode(hello)])

    timeout = ready_timeout_s()
    if not handshake.poll(int(timeout * 1000)):
        logger.error(
            "engine %d: no INIT from %s within %.0f s (VRS_ENGINE_READY_TIMEOUT_S)",
            engine_index,
            handshake_address,
            timeout,
        )
        return 1
    kind, body = handshake.recv_multipart()
    if kind[0] != p.HandshakeKind.INIT:
        logger.error("engine %d: expected INIT, got handshake kind %#x", engine_index, kind[0])
        return 1
    init = p.INIT_DECODER.decode(body)

    try:
        config = config_from_map(init.engine_config)
        logging.getLogger("vrs").setLevel(config.log_level.upper())
        backend, ready = build_backend(config)
    except Exception as exc:  # any startup failure is reported to the launcher, then fatal
        # The message says what is wrong (an unsupported model, a bad setting); the
        # traceback is only for debugging the engine itself.
        message = f"{type(exc).__name__}: {exc}"
        logger.error("engine %d: startup failed: %s", engine_index, message)
        logger.debug("engine %d: startup failure traceback", engine_index, exc_info=True)
        failed = p.Failed(engine_index=engine_index, message=message)
        handshake.send_multipart([bytes([p.HandshakeKind.FAILED]), p.encode(failed)])
        handshake.close()
        ctx.term()
        return 1
    ready.engine_index = engine_index

    input_socket = ctx.socket(zmq.DEALER)
    input_socket.setsockopt(zmq.IDENTITY, identity)
    input_socket.setsockopt(zmq.LINGER, 0)
    if init.input_address.startswith("tcp://"):
        _watch_frontend(input_socket, engine_index, init.input_address, stop)
    input_socket.connect(init.input_address)
    output_socket = ctx.socket(zmq.PUSH)
    output_socket.setsockopt(zmq.LINGER, 2000)
    output_socket.connect(init.output_address)

    ready_body = p.encode(ready)
    handshake.send_multipart([bytes([p.HandshakeKind.READY]), ready_body])
    input_socket.send_multipart([bytes([p.HandshakeKind.READY]), ready_body])
    logger.info(
        "engine %d ready (pid %d, %s)",
        engine_index,
        os.getpid(),
        "mock" if ready.is_mock else ready.model_name,
    )

    core = EngineCore(backend, engine_index, input_socket, output_socket)
    code = 0
    try:
        core.run_busy_loop(stop)
    except Exception:  # fatal engine error: tell the frontend, then exit non-zero
        logger.exception("engine %d: fatal error", engine_index)
        core.send_dead_sentinel()
        code = 1
    finally:
        backend.close()
    output_socket.close(linger=500)  # the outputs are flushed before the caller goes on
    return code
