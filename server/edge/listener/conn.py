"""The Python servers' connections: uvicorn's httptools protocol, subclassed
(:class:`HttpProtocol`, passed as uvicorn's ``http=``) for what uvicorn lacks there, a
request head timeout and a head size limit, plus an acceptor that serves at most
``max_connections`` at once; vrs-rs has the same with hyper
(``rust/server/src/edge/listener/``). Behaviour: docs/api.md, "Connection limits".
"""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
import socket
import ssl
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import msgspec
import uvicorn
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from server.edge.error import ErrorBody, ErrorDetail
from server.http_args import HttpArgs

logger = logging.getLogger("vrs.frontend")

LISTEN_BACKLOG = 4096
# After a 431 the client may still be sending its head: read (and drop) it this long so
# the answer is not lost to a reset, then close.
REJECT_LINGER_S = 1.0
# A closing TLS connection waits this long for the client's close_notify (asyncio's
# default, 30 s, would hold a drain up for a client that keeps an idle connection open).
TLS_SHUTDOWN_TIMEOUT_S = 2.0


def _headers_too_large(limit: int) -> bytes:
    message = (f"request header fields are larger than the limit of {limit} bytes; raise "
               "--h11-max-incomplete-event-size")
    body = ErrorBody(ErrorDetail(message, "RequestHeaderFieldsTooLargeError", None, 431))
    payload = msgspec.json.encode(body)
    return b"".join([STATUS_LINE[431], b"content-type: application/json\r\n",
                     b"content-length: ", str(len(payload)).encode(), b"\r\n",
                     b"connection: close\r\n\r\n", payload])


class ListenerConfig(uvicorn.Config):
    """uvicorn's settings plus the listener's (read by HttpProtocol and the server)."""

    def __init__(self, app: Any, http: HttpArgs, tls: ssl.SSLContext | None,
                 **kwargs: Any) -> None:
        if tls is not None:
            kwargs["ssl_context_factory"] = lambda _config, _default: tls
        # uvicorn annotates timeout_keep_alive int but hands it to loop.call_later (float)
        super().__init__(app, http=HttpProtocol,
                         timeout_keep_alive=http.http_timeout_keep_alive,  # type: ignore[arg-type]
                         **kwargs)
        self.header_read_timeout = http.header_read_timeout
        self.max_head_bytes = http.h11_max_incomplete_event_size
        self.max_connections = http.max_connections
        self.too_large_response = _headers_too_large(http.h11_max_incomplete_event_size)


class HttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools connection with a head timeout and a head size limit."""

    config: ListenerConfig
    on_close: Callable[[], None] | None = None  # the max_connections slot it holds

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._in_head = True  # until the first request's head is complete
        self._head_bytes = 0
        self._rejected = False
        self._head_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.config.header_read_timeout, self._head_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)
        if self.on_close is not None:
            on_close, self.on_close = self.on_close, None
            on_close()

    def data_received(self, data: bytes) -> None:
        if self._rejected:
            return  # the rest of a refused head: dropped
        super().data_received(data)
        if not self._in_head or self.transport.is_closing():
            return
        # A head is still incomplete: this chunk counts towards it (at most the tail of
        # the previous request's body too, when a client pipelines).
        self._head_bytes += len(data)
        if self._head_bytes > self.config.max_head_bytes:
            self._reject_head()
        elif self._head_timer is None:
            self._head_timer = self.loop.call_later(self.config.header_read_timeout,
                                                    self._head_timeout)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_bytes = 0

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._cancel_head_timer()
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.config.max_head_bytes:
            self._reject_head()
            return
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._rejected:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._rejected:
            super().on_message_complete()

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a response is in progress; the next head is timed from its next byte
        if not self.transport.is_closing():
            self.logger.debug("closing a connection: no complete request head within %s s",
                              self.config.header_read_timeout)
            self.transport.close()

    def _reject_head(self) -> None:
        """431, then close once the client stopped sending (or after REJECT_LINGER_S)."""
        self._rejected = True
        self._in_head = False
        self._cancel_head_timer()
        self.logger.info("431: a request head over %d bytes", self.config.max_head_bytes)
        self.transport.write(self.config.too_large_response)
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(REJECT_LINGER_S, self.transport.close)
        else:
            self.transport.close()


class _LimitedAcceptor:
    """Accepts on ``sock`` while fewer than ``limit`` connections are open; beyond it new
    connections wait in the kernel's listen backlog. Closed like an asyncio Server."""

    def __init__(self, sock: socket.socket, factory: Callable[[], HttpProtocol],
                 tls: ssl.SSLContext | None, handshake_timeout: float, limit: int) -> None:
        self._sock = sock
        self._factory = factory
        self._tls = tls
        self._handshake_timeout = handshake_timeout
        self._slots = asyncio.Semaphore(limit)
        self._pending: set[asyncio.Task[None]] = set()
        sock.setblocking(False)
        self._task = asyncio.get_running_loop().create_task(self._accept(), name="vrs-accept")

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._slots.acquire()
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:
                self._slots.release()
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    logger.warning("accept: %s; retrying in 0.1 s", exc.strerror)
                    await asyncio.sleep(0.1)
                continue
            task = loop.create_task(self._connect(conn))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _connect(self, conn: socket.socket) -> None:
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self._slots.release()

        def protocol() -> HttpProtocol:
            made = self._factory()
            made.on_close = release
            return made

        conn.setblocking(False)
        try:
            loop = asyncio.get_running_loop()
            if self._tls is None:
                await loop.connect_accepted_socket(protocol, conn)
            else:
                await loop.connect_accepted_socket(
                    protocol, conn, ssl=self._tls,
                    ssl_handshake_timeout=self._handshake_timeout,
                    ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S)
        except OSError:  # ssl.SSLError and TimeoutError are OSErrors too
            conn.close()
            release()

    def close(self) -> None:
        self._task.cancel()
        for task in self._pending:
            task.cancel()

    async def wait_closed(self) -> None:
        await asyncio.gather(self._task, *self._pending, return_exceptions=True)


class DrainingServer(uvicorn.Server):
    """uvicorn's server with our signal handling (no re-raise of the signal at exit) and
    our listener: a TLS handshake bounded by the head timeout, ``max_connections``."""

    config: ListenerConfig

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            if not self.should_exit:
                logger.info("received %s: draining (up to %.0f s)", signal.Signals(sig).name,
                            self.config.timeout_graceful_shutdown or 0)
            self.should_exit = True

    async def startup(self, sockets: Sequence[socket.socket] | None = None) -> None:
        config = self.config
        assert sockets is not None, "the listener binds first (bind_listener)"

        def create_protocol(_loop: asyncio.AbstractEventLoop | None = None) -> HttpProtocol:
            return HttpProtocol(config=config, server_state=self.server_state,
                                app_state=self.lifespan.state, _loop=_loop)

        loop = asyncio.get_running_loop()
        self.servers: list[Any] = []
        for sock in sockets:
            if config.max_connections is not None:
                self.servers.append(_LimitedAcceptor(sock, create_protocol, config.ssl,
                                                     config.header_read_timeout,
                                                     config.max_connections))
            elif config.ssl is not None:
                self.servers.append(await loop.create_server(
                    create_protocol, sock=sock, ssl=config.ssl, backlog=LISTEN_BACKLOG,
                    ssl_handshake_timeout=config.header_read_timeout,
                    ssl_shutdown_timeout=TLS_SHUTDOWN_TIMEOUT_S))
            else:
                self.servers.append(await loop.create_server(create_protocol, sock=sock,
                                                             backlog=LISTEN_BACKLOG))
        self.started = True


def http_server(app: Any, log_level: str, access_log: bool, graceful_shutdown_s: float,
                http: HttpArgs, tls: ssl.SSLContext | None) -> DrainingServer:
    """uvicorn for ``app`` on a socket bound beforehand (``serve(sockets=[sock])``, run on
    uvloop by the caller): httptools with HttpProtocol, no lifespan; ``log_level`` is a
    Python logging level name."""
    return DrainingServer(ListenerConfig(
        app, http, tls,
        loop="none",
        ws="none",
        lifespan="off",
        log_level=log_level.lower(),
        log_config=None,  # uvicorn's loggers reach ours (setup_logging), in its layout
        access_log=access_log,
        timeout_graceful_shutdown=graceful_shutdown_s,
    ))
