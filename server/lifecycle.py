"""``serve(args)``: the Python frontend process (``vrs serve --frontend python``).

Order of events (design §2, "bind first, hand over second"):

1. bind the HTTP listening socket (connections queue in the kernel from now on);
2. bind the ZMQ input ROUTER and output PULL on ipc:// in a private temp dir;
3. start the engine(s) with ``engine.process.launcher`` and wait for READY on the handshake and
   on the input socket, while the tokenizer loads in a worker thread;
4. serve HTTP with uvicorn (uvloop, httptools) on the pre-bound socket.

Exit: SIGINT/SIGTERM stop accepting, drain in-flight requests for up to
``shutdown_timeout`` seconds, stop the engines, exit 0. An engine's death fails the open
requests (503 / an SSE error event), closes the server and exits 1. A startup failure
exits 1, bad arguments 2.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import FrameType
from typing import Any, TypeVar

import msgspec

from server.batch import DEFAULT_MAX_BATCH_PROMPTS
from server.connection import DrainingServer
from server.connection import http_server as listener_server
from server.content_format import check_option as check_content_format
from server.engine_client import EngineClient, EngineConnectError
from server.http_args import HttpArgs
from server.listener import Listener, ListenError, bind_listener, ssl_context
from server.parsers.select import check_settings, choose, model_config
from server.routes import App, Handler, Options
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
LOG_LEVELS = ("trace", "debug", "info", "warning", "warn", "error", "critical")
DEFAULT_HOST = "0.0.0.0"
DEFAULT_PORT = 8000
DEFAULT_SHUTDOWN_TIMEOUT_S = 30.0
DEFAULT_MAX_REQUEST_BODY = 32 * 1024 * 1024
API_KEY_ENV = "VRS_API_KEY"

Parsed = TypeVar("Parsed")


class CommonArgs(msgspec.Struct):
    """The args-json keys of both services, ``vrs serve`` and ``vrs render``
    (``rust/server/src/args.rs``)."""

    model: str
    served_model_name: str | None = None
    host: str | None = None
    port: int | None = None
    log_level: str | None = None
    chat_template: str | None = None
    tokenizer: str | None = None  # a tokenizer directory; None: the model directory
    chat_template_content_format: str | None = None  # auto | string | openai; None: auto


class ServeArgs(CommonArgs, forbid_unknown_fields=True):
    """The args-json map (docs/internals.md); defaults as in ``rust/server/src/args.rs``."""

    shutdown_timeout: float | None = None
    python_executable: str | None = None
    engine_config: dict[str, Any] | None = None
    api_key: str | None = None
    max_request_body: int | None = None
    max_concurrent_requests: int | None = None
    request_timeout: float | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    max_batch_prompts: int | None = None
    data_parallel_size: int | None = None
    data_parallel_size_local: int | None = None  # engines elsewhere: Rust frontend only
    data_parallel_address: str | None = None
    data_parallel_rpc_port: int | None = None


class _Interrupted(BaseException):
    """SIGINT/SIGTERM arrived while the engines were starting."""


class Config(msgspec.Struct):
    """ServeArgs with the defaults filled in and the values checked."""

    model: str
    served_model_name: str
    host: str
    port: int
    log_level: str
    shutdown_timeout: float
    python_executable: str
    chat_template: str | None
    content_format: str  # --chat-template-content-format: auto | string | openai
    tokenizer: str  # the directory of tokenizer.json: ``tokenizer`` or else ``model``
    engine_config: dict[str, Any]
    data_parallel_size: int
    options: Options  # what the routes need; the parsers are chosen with the template


Args = TypeVar("Args", bound=CommonArgs)


def convert_args(args: dict[str, Any], kind: type[Args]) -> Args:
    """The args-json map as ``kind``, its shared keys checked; raises ValueError naming
    the problem."""
    try:
        raw = msgspec.convert(args, kind)
    except msgspec.ValidationError as exc:
        raise ValueError(str(exc)) from None
    if not os.path.isdir(raw.model):
        raise ValueError(f"model directory {raw.model!r} does not exist")
    level = (raw.log_level or "info").lower()
    if level not in LOG_LEVELS:
        raise ValueError(f"log_level must be one of {', '.join(LOG_LEVELS)}; got {level!r}")
    if raw.port is not None and not 0 <= raw.port < 65536:
        raise ValueError(f"port must be in 0..65535; got {raw.port}")
    if raw.chat_template is not None and not os.path.isfile(raw.chat_template):
        raise ValueError(f"chat template file {raw.chat_template!r} does not exist")
    if raw.tokenizer is not None and not os.path.isdir(raw.tokenizer):
        raise ValueError(f"tokenizer directory {raw.tokenizer!r} does not exist")
    raw.chat_template_content_format = check_content_format(raw.chat_template_content_format)
    return raw


def parse_args(args: dict[str, Any]) -> Config:
    """Check the args-json map; raises ValueError naming the problem."""
    raw = convert_args(args, ServeArgs)
    timeout = DEFAULT_SHUTDOWN_TIMEOUT_S if raw.shutdown_timeout is None else raw.shutdown_timeout
    if not (math.isfinite(timeout) and timeout >= 0):
        raise ValueError(f"shutdown_timeout must be >= 0 seconds, got {timeout}")
    level = (raw.log_level or "info").lower()
    port = DEFAULT_PORT if raw.port is None else raw.port
    engine_config = dict(raw.engine_config or {})
    engine_config.setdefault("model", raw.model)
    data_parallel_size = 1 if raw.data_parallel_size is None else raw.data_parallel_size
    if not 1 <= data_parallel_size < 65536:
        raise ValueError(f"data_parallel_size must be in 1..65535; got {data_parallel_size}")
    if raw.data_parallel_size_local not in (None, data_parallel_size):
        raise ValueError("data_parallel_size_local (engines on other hosts) needs the Rust "
                         "frontend")
    return Config(model=raw.model, served_model_name=raw.served_model_name or raw.model,
                  host=raw.host or DEFAULT_HOST, port=port, log_level=level,
                  shutdown_timeout=timeout,
                  python_executable=raw.python_executable or sys.executable,
                  chat_template=raw.chat_template,
                  content_format=raw.chat_template_content_format or "auto",
                  tokenizer=raw.tokenizer or raw.model,
                  engine_config=engine_config,
                  data_parallel_size=data_parallel_size, options=_options(raw))


def _options(raw: ServeArgs) -> Options:
    """The HTTP settings of the args-json map, checked (defaults as in args.rs)."""
    body = DEFAULT_MAX_REQUEST_BODY if raw.max_request_body is None else raw.max_request_body
    if body < 1:
        raise ValueError(f"max_request_body must be >= 1 byte, got {body}")
    limit = raw.max_concurrent_requests
    if limit is not None and limit < 1:
        raise ValueError(f"max_concurrent_requests must be >= 1, got {limit}")
    timeout = raw.request_timeout
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"request_timeout must be > 0 seconds, got {timeout}")
    check_settings(raw.tool_call_parser, raw.reasoning_parser)
    batch = DEFAULT_MAX_BATCH_PROMPTS if raw.max_batch_prompts is None else raw.max_batch_prompts
    if batch < 1:
        raise ValueError(f"max_batch_prompts must be >= 1, got {batch}")
    key = raw.api_key if raw.api_key is not None else os.environ.get(API_KEY_ENV)
    return Options(api_key=key or None, max_request_body=body, max_concurrent_requests=limit,
                   request_timeout=timeout, tool_call_parser=raw.tool_call_parser,
                   reasoning_parser=raw.reasoning_parser, max_batch_prompts=batch)


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
    """uvicorn for ``app`` on the listener's socket (server/listener.py), at ``level`` (a
    LOG_LEVELS name), its access log at trace and debug."""
    return listener_server(app, python_level(level), level in ("trace", "debug"),
                           graceful_shutdown_s, http, tls)


def serve(args: dict[str, Any]) -> int:
    """Run the Python frontend with its engine(s); returns the process exit code."""
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
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _serve(config, listener, tls, tmpdir)
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


def _serve(config: Config, listener: Listener, tls: ssl.SSLContext | None, tmpdir: str) -> int:
    from engine.process.handshake import ready_timeout_s
    from engine.process.launcher import EngineStartError, start_engines

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _raise_interrupted)
    executor = text_executor()
    client = EngineClient(f"ipc://{tmpdir}/input", f"ipc://{tmpdir}/output")
    group = None
    try:
        text_future = executor.submit(ModelText, config.tokenizer, config.chat_template,
                                      config.content_format)
        try:
            group = start_engines(config.engine_config, client.input_address,
                                  client.output_address, python=config.python_executable,
                                  count=config.data_parallel_size)
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
        app = App(client, text, config.served_model_name, config.model, executor, options)
        return _run_http(config, listener.sock, tls, app, client)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # stopping already; bounded below
            signal.signal(sig, signal.SIG_IGN)
        if group is not None:
            group.stop(ENGINE_STOP_GRACE_S)
        client.close()
        executor.shutdown(wait=False, cancel_futures=True)


def _run_http(config: Config, sock: socket.socket, tls: ssl.SSLContext | None, app: App,
              client: EngineClient) -> int:
    import uvloop

    # Open streams are cut off with an error event at shutdown_timeout (below); uvicorn
    # closes what is left CUT_OFF_FLUSH_S later.
    server = http_server(app, config.log_level, config.shutdown_timeout + CUT_OFF_FLUSH_S,
                         config.http, tls)
    # From here on a signal means "drain and stop" (uvicorn installs the same handler
    # while it serves); one that arrives before uvicorn starts is not lost.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, server.handle_exit)
    died: list[str] = []

    def on_dead(reason: str) -> None:
        died.append(reason)
        server.config.timeout_graceful_shutdown = DEATH_DRAIN_S

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

    async def main() -> None:
        client.start(on_dead)
        cut_off = asyncio.create_task(cut_off_at_timeout(), name="vrs-cut-off")
        try:
            await server.serve(sockets=[sock])
        finally:
            cut_off.cancel()
            await client.stop()

    uvloop.run(main())
    if died:
        logger.error("exiting: %s", died[0])
        return EXIT_FAILURE
    return EXIT_OK
