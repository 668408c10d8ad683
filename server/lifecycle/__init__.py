"""``serve(args)``: the Python frontend process (``vrs serve --frontend python``); the
render service starts in ``server/lifecycle/render.py``. Rust: rust/server/src/lifecycle.rs.

Order of events (docs/internals.md, "Processes: bind first, hand over second"):

1. bind the HTTP listening socket (connections queue in the kernel from now on);
2. bind the ZMQ input ROUTER and output PULL on ipc:// in a private temp dir;
3. start the engine(s) with ``engine.process.launcher`` and wait for READY on the handshake and
   on the input socket, while the tokenizer loads in a worker thread;
4. serve HTTP with uvicorn (uvloop, httptools) on the pre-bound socket.

Exit: SIGINT/SIGTERM (or ``stop``, for a server on a thread) stop accepting, drain
in-flight requests for up to ``shutdown_timeout`` seconds, stop the engines, exit 0. An
engine's death fails the open requests (503 / an SSE error event), closes the server and
exits 1. A startup failure exits 1, bad arguments 2.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any, TypeVar

import msgspec

from engine.process.launcher import Engines
from server.args import Config, parse_args
from server.edge import Handler
from server.edge.listener import Listener, ListenError, bind_listener, ssl_context
from server.edge.listener.conn import DrainingServer
from server.edge.listener.conn import http_server as listener_server
from server.edge.middleware import for_http
from server.edge.trace import Traces
from server.engine_client import EngineClient, EngineConnectError
from server.http_args import HttpArgs
from server.parsers.select import choose, model_config
from server.routes import App
from server.state import State
from server.text import ModelText, TextError

logger = logging.getLogger("vrs.frontend")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
ENGINE_STOP_GRACE_S = 5.0
# After the engine died: keep answering (503) this long so clients see why, then give
# open streams this long to end (as vrs-rs does).
DEATH_LINGER_S = 1.0
DEATH_DRAIN_S = 3.0
# After the shutdown timeout cut open streams off: how long they get to send the error.
CUT_OFF_FLUSH_S = 1.0
PY_LEVELS = {"trace": "DEBUG", "warn": "WARNING"}
Parsed = TypeVar("Parsed")
# Starts the engines and runs the handshake: (engine_config, input address, output
# address, count) -> the engines, ready.
EngineStarter = Callable[[dict[str, Any], str, str, int], Engines]


class _Interrupted(BaseException):
    """SIGINT/SIGTERM arrived while the engines were starting."""


def checked_args(command: str, parse: Callable[[dict[str, Any]], Parsed],
                 args: dict[str, Any]) -> Parsed | None:
    """A service process's first step: ``parse(args)``, the args-json map; None after
    printing ``vrs COMMAND: invalid arguments: ...`` (the process then exits EXIT_USAGE)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return parse(args)
    except ValueError as exc:
        print(f"vrs {command}: invalid arguments: {exc}", file=sys.stderr)
        return None


def python_level(level: str) -> str:
    """The logging level name of a LOG_LEVELS name (lower case)."""
    return PY_LEVELS.get(level, level.upper())


def setup_logging(level: str) -> None:
    """Log to stderr at ``level`` (a LOG_LEVELS name, lower case)."""
    from engine.logfmt import setup_logging as setup_layout

    # One layout for every vrs process (engine/logfmt.py, rust/cli/src/logfmt.rs).
    setup_layout(python_level(level))
    logging.getLogger("vrs").setLevel(python_level(level))


def text_executor() -> ThreadPoolExecutor:
    """The threads that load the tokenizer and template and tokenize large bodies."""
    return ThreadPoolExecutor(max_workers=min(8, (os.cpu_count() or 1) + 2),
                              thread_name_prefix="vrs-text")


def http_server(app: Handler, level: str, graceful_shutdown_s: float, http: HttpArgs,
                tls: ssl.SSLContext | None) -> DrainingServer:
    """uvicorn for ``app`` on the listener's socket (server/edge/listener/), at ``level`` (a
    LOG_LEVELS name), its access log at trace and debug."""
    return listener_server(app, python_level(level), level in ("trace", "debug"),
                           graceful_shutdown_s, http, tls)


def engine_processes(python: str) -> EngineStarter:
    """The engines of ``vrs serve``: ``python -m engine`` children (engine/process/launcher.py)."""
    from engine.process.launcher import start_engines

    def start(engine_config: dict[str, Any], input_address: str, output_address: str,
              count: int) -> Engines:
        return start_engines(engine_config, input_address, output_address, count=count,
                             python=python)

    return start


def serve(args: dict[str, Any], start_engines: EngineStarter | None = None,
          stop: threading.Event | None = None) -> int:
    """Run the Python frontend with its engine(s); returns the process exit code.

    As the process (``python -m server``) it starts its engines as ``python -m engine``
    children and stops on SIGINT/SIGTERM. Run on another thread (the in-process tests,
    tests/server/server_kit.py), it is given ``stop``, which stops it as SIGTERM does, and
    leaves the signal handlers alone; ``start_engines`` starts the engines otherwise
    (tests/engine_threads.py: on threads of the process, on the same wire).
    """
    config = checked_args("frontend", parse_args, args)
    if config is None:
        return EXIT_USAGE
    setup_logging(config.log_level)

    try:
        tls = ssl_context(config.http)
        listener = bind_listener(config.http, config.host, config.port)
    except ListenError as exc:
        logger.error("%s", exc)
        return EXIT_FAILURE
    tmpdir = tempfile.mkdtemp(prefix="vrs-frontend-")
    # The signals this server handles: none where it is stopped by ``stop``.
    signals = (signal.SIGINT, signal.SIGTERM) if stop is None else ()
    previous = {sig: signal.getsignal(sig) for sig in signals}
    start = start_engines or engine_processes(config.python_executable)
    try:
        return _serve(config, listener, tls, tmpdir, start, signals, stop)
    except _Interrupted as exc:
        logger.info("%s during startup: stopped", exc)
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        listener.close()
        shutil.rmtree(tmpdir, ignore_errors=True)


def _raise_interrupted(sig: int, frame: FrameType | None) -> None:
    raise _Interrupted(signal.Signals(sig).name)


def _serve(config: Config, listener: Listener, tls: ssl.SSLContext | None, tmpdir: str,
           start_engines: EngineStarter, signals: tuple[signal.Signals, ...],
           stop: threading.Event | None) -> int:
    from engine.process.handshake import ready_timeout_s
    from engine.process.launcher import EngineStartError

    for sig in signals:
        signal.signal(sig, _raise_interrupted)
    executor = text_executor()
    client = EngineClient(f"ipc://{tmpdir}/input", f"ipc://{tmpdir}/output")
    group = None
    traces: Traces | None = None
    try:
        text_future = executor.submit(ModelText, config.tokenizer, config.chat_template,
                                      config.content_format)
        try:
            group = start_engines(config.engine_config, client.input_address,
                                  client.output_address, config.data_parallel_size)
            client.wait_engines(group, ready_timeout_s())
            text = text_future.result()
        except (EngineStartError, EngineConnectError, TextError) as exc:
            logger.error("startup failed: %s", exc)
            return EXIT_FAILURE
        ready = next(iter(client.readies.values()))
        logger.info("engine ready: %s (max_model_len %d%s)", ready.model_name,
                    client.max_model_len, ", mock" if ready.is_mock else "")
        # As vrs-rs announces it (rust/server/src/lifecycle.rs): the listening socket
        # is bound, so the address accepts connections from now on.
        logger.info("serving \"%s\" on %s (POST /v1/completions, /v1/chat/completions; "
                    "GET /v1/models, /health, /metrics); Ctrl-C to stop (twice to stop now)",
                    config.served_model_name, listener.address())
        tools, reasoning = choose(config.options.tool_call_parser,
                                  config.options.reasoning_parser, text.chat_template_source,
                                  model_config(config.model))
        options = msgspec.structs.replace(config.options, tool_call_parser=tools.name,
                                          reasoning_parser=reasoning.name)
        logger.info("%s", text.content_format_line())
        if options.api_key:
            logger.info("API key required on /v1/*")
        if options.otlp_traces_endpoint is not None:
            traces = Traces(options.otlp_traces_endpoint, options.collect_detailed_traces,
                            config.served_model_name)
        app = App(State(client, text, config.served_model_name, config.model, executor,
                        options, traces))
        return _run_http(config, listener.sock, tls, app, client, signals, stop)
    finally:
        for sig in signals:  # stopping already; bounded below
            signal.signal(sig, signal.SIG_IGN)
        if group is not None:
            group.stop(ENGINE_STOP_GRACE_S)
        client.close()
        executor.shutdown(wait=False, cancel_futures=True)
        if traces is not None:
            traces.shutdown()  # the last spans, a few seconds at most


def _run_http(config: Config, sock: socket.socket, tls: ssl.SSLContext | None, app: App,
              client: EngineClient, signals: tuple[signal.Signals, ...],
              stop: threading.Event | None) -> int:
    import uvloop

    # Open streams are cut off with an error event at shutdown_timeout (below); uvicorn
    # closes what is left CUT_OFF_FLUSH_S later.
    server = http_server(for_http(app, config.http), config.log_level,
                         config.shutdown_timeout + CUT_OFF_FLUSH_S, config.http, tls)
    # From here on a signal means "drain and stop" (uvicorn installs the same handler
    # while it serves); one that arrives before uvicorn starts is not lost.
    for sig in signals:
        signal.signal(sig, server.handle_exit)
    died: list[str] = []

    def on_dead(reason: str) -> None:
        died.append(reason)
        # uvicorn annotates it int | None but hands it to asyncio.timeout (float seconds)
        server.config.timeout_graceful_shutdown = DEATH_DRAIN_S  # type: ignore[assignment]

        def stop() -> None:
            server.should_exit = True

        asyncio.get_running_loop().call_later(DEATH_LINGER_S, stop)

    async def cut_off_at_timeout() -> None:
        """Requests still open ``shutdown_timeout`` after the signal (or at a second one)
        end with an error event, as in vrs-rs, rather than a silent cut."""
        loop = asyncio.get_running_loop()
        while not server.should_exit:
            await asyncio.sleep(0.05)
        deadline = loop.time() + config.shutdown_timeout
        while loop.time() < deadline and not server.force_exit:
            await asyncio.sleep(0.05)
        client.cut_off("the server is shutting down")

    async def stop_when_asked(stop: threading.Event) -> None:
        """``stop`` set (by another thread): drain and stop, as at SIGTERM."""
        while not stop.is_set():
            await asyncio.sleep(0.05)
        if not server.should_exit:
            logger.info("asked to stop: draining (up to %.0f s)",
                        server.config.timeout_graceful_shutdown or 0)
            server.should_exit = True

    async def main() -> None:
        client.start(on_dead)
        tasks = [asyncio.create_task(cut_off_at_timeout(), name="vrs-cut-off")]
        if stop is not None:
            tasks.append(asyncio.create_task(stop_when_asked(stop), name="vrs-stop"))
        try:
            await server.serve(sockets=[sock])
        finally:
            for task in tasks:
                task.cancel()
            await client.stop()

    uvloop.run(main())
    if died:
        logger.error("exiting: %s", died[0])
        return EXIT_FAILURE
    return EXIT_OK
