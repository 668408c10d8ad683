"""The Python servers' listener and connections (server/edge/listener/)
on real loopback sockets, with a tiny ASGI app in a thread: the head timeout, the 431
head limit, the keep-alive idle timeout, max_connections, the Unix socket's stale/live
rule and a bad certificate. The same behaviour through the whole server, in every mode:
tests/e2e/test_slow_clients.py, test_uds.py, test_tls.py."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvloop

from server.edge.listener import Listener, ListenError, bind_listener, bind_unix, ssl_context
from server.edge.listener.conn import http_server
from server.http_args import HttpArgs

pytestmark = pytest.mark.server

REQUEST = b"GET / HTTP/1.1\r\nhost: test\r\n\r\n"


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    if scope["path"] == "/slow":
        await asyncio.sleep(0.5)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


class Running:
    """``app`` served by the listener on its own uvloop thread until ``stop``."""

    def __init__(self, http: HttpArgs) -> None:
        self.listener: Listener = bind_listener(http, "127.0.0.1", 0)
        self.server = http_server(app, "WARNING", False, 1.0, http, ssl_context(http))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)

    def _run(self) -> None:
        uvloop.run(self.server.serve(sockets=[self.listener.sock]))

    @property
    def port(self) -> int:
        return self.listener.sock.getsockname()[1]

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return sock

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.listener.close()


@pytest.fixture
def running(request: pytest.FixtureRequest) -> Iterator[Running]:
    server = Running(HttpArgs(**getattr(request, "param", {})))
    yield server
    server.stop()


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """True once the server closed ``sock`` (EOF or reset) within ``timeout`` seconds."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


@pytest.mark.parametrize("running", [{"header_read_timeout": 0.5}], indirect=True)
def test_half_a_head_is_closed_after_the_header_timeout(running: Running) -> None:
    silent, partial = running.connect(), running.connect()
    partial.sendall(b"GET / HTTP/1.1\r\nhost: te")
    started = time.monotonic()
    for sock in (silent, partial):
        assert closed_by_peer(sock, 3), "a connection without a whole head was kept open"
    assert 0.4 < time.monotonic() - started < 2
    response = httpx.get(f"http://127.0.0.1:{running.port}/", timeout=5)
    assert response.text == "ok"


@pytest.mark.parametrize("running", [{"header_read_timeout": 0.5}], indirect=True)
def test_a_slow_response_is_not_a_slow_head(running: Running) -> None:
    response = httpx.get(f"http://127.0.0.1:{running.port}/slow", timeout=5)
    assert response.status_code == 200


def test_a_head_over_the_limit_is_431(running: Running) -> None:
    big = {"x-big": "a" * (100 * 1024)}
    response = httpx.get(f"http://127.0.0.1:{running.port}/", headers=big, timeout=5)
    assert response.status_code == 431
    assert response.json()["error"]["code"] == 431
    assert "--h11-max-incomplete-event-size" in response.json()["error"]["message"]
    fits = {"x-big": "a" * (60 * 1024)}
    assert httpx.get(f"http://127.0.0.1:{running.port}/", headers=fits).status_code == 200


def test_a_head_sent_in_pieces_over_the_limit_is_431(running: Running) -> None:
    sock = running.connect()
    sock.sendall(b"GET / HTTP/1.1\r\nhost: test\r\nx-big: ")
    for _ in range(80):
        sock.sendall(b"a" * 1024)
    reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 431 "), reply
    sock.close()


@pytest.mark.parametrize("running", [{"http_timeout_keep_alive": 0.5}], indirect=True)
def test_an_idle_kept_alive_connection_is_closed(running: Running) -> None:
    sock = running.connect()
    sock.sendall(REQUEST)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    started = time.monotonic()
    assert closed_by_peer(sock, 3)
    assert 0.4 < time.monotonic() - started < 2


@pytest.mark.parametrize("running", [{"max_connections": 2}], indirect=True)
def test_max_connections_leaves_the_next_one_in_the_backlog(running: Running) -> None:
    first, second = running.connect(), running.connect()
    for sock in (first, second):
        sock.sendall(REQUEST)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    third = running.connect()  # the kernel completes the handshake; nobody serves it
    third.sendall(REQUEST)
    third.settimeout(0.5)
    with pytest.raises(TimeoutError):
        third.recv(65536)
    first.close()
    third.settimeout(5)
    assert third.recv(65536).startswith(b"HTTP/1.1 200 ")
    second.close()
    third.close()


def test_a_stale_unix_socket_is_replaced_and_a_live_one_refused(tmp_path: Path) -> None:
    path = str(tmp_path / "vrs.sock")
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(path)
    stale.close()  # the file stays, nobody listens
    live = bind_unix(path)
    with pytest.raises(ListenError, match="another server is listening"):
        bind_unix(path)
    listener = Listener(live, "127.0.0.1", False, path)
    assert listener.address() == f"unix:{path}"
    listener.close()
    assert not Path(path).exists()
    Path(path).write_text("not a socket")
    with pytest.raises(ListenError, match="is not a socket"):
        bind_unix(path)


def test_a_bad_certificate_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate")
    with pytest.raises(ListenError, match="cannot load the TLS certificate"):
        ssl_context(HttpArgs(ssl_certfile=str(tmp_path / "cert.pem")))
    with pytest.raises(ListenError, match="No such file"):
        ssl_context(HttpArgs(ssl_certfile=str(tmp_path / "missing.pem")))
