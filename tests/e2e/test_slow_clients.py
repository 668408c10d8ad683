"""Slow and greedy clients (``--header-read-timeout``, ``--h11-max-incomplete-event-size``,
``--http-timeout-keep-alive``) in the request modes: 2,000 connections that send half a
request head are all closed within the head timeout while normal requests and /health are
answered long before any of those heads times out (a server held up by them would answer
only then); a 100 KiB header gets 431 (a 60 KiB one is served); an idle
kept-alive connection is closed after the keep-alive timeout. ``--max-connections 2``: a
third connection waits in the kernel's backlog, unanswered, until one of the first two
closes, then is served (also tests/server/test_connection.py and the Rust listener's
tests)."""

from __future__ import annotations

import selectors
import socket
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import MODEL, ROUTE_MODES, Server, wait_until

pytestmark = pytest.mark.e2e

HEADER_TIMEOUT_S = 3.0
KEEP_ALIVE_S = 1.0
SLACK_S = 1.5  # two shared cores: timers fire late, closes take a while
# A request the half heads do not hold up is answered well before the first of them times
# out; the bound is relative to that timeout, not a speed target (those are benchmarks).
UNBLOCKED_S = HEADER_TIMEOUT_S / 4
HALF_HEAD = b"POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: appl"
CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}


@pytest.fixture(scope="module", params=ROUTE_MODES)
def edge_server(request: pytest.FixtureRequest, demo_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("slow") / f"{request.param}.log"
    server = Server(request.param, demo_model, log, cli_args=(
        "--mock-step-delay-ms", "1", "--header-read-timeout", str(HEADER_TIMEOUT_S),
        "--http-timeout-keep-alive", str(KEEP_ALIVE_S)))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def timed_chat(http: httpx.Client, url: str) -> float:
    """Seconds for one chat completion (the client made beforehand: making one costs more
    than the request)."""
    started = time.perf_counter()
    response = http.post(f"{url}/v1/chat/completions", json=CHAT)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    return elapsed


def wait_closed(socks: list[socket.socket], timeout: float) -> dict[socket.socket, float]:
    """Wait until the server closes each socket (EOF or reset); returns when each closed
    (time.monotonic()); the ones still open are missing."""
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    closed: dict[socket.socket, float] = {}
    deadline = time.monotonic() + timeout
    while len(closed) < len(socks) and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.2):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                if sock.recv(65536):
                    continue  # an answer (e.g. 408) before the close
            except BlockingIOError:
                continue
            except ConnectionResetError:
                pass
            closed[sock] = time.monotonic()
            selector.unregister(sock)
    selector.close()
    return closed


def accept_backlog(port: int) -> int:
    """Connections waiting in the kernel to be accepted on 127.0.0.1:``port``."""
    with open("/proc/net/tcp") as fh:
        for line in fh.readlines()[1:]:
            fields = line.split()
            local, state, queues = fields[1], fields[3], fields[4]
            if state == "0A" and int(local.split(":")[1], 16) == port:
                return int(queues.split(":")[1], 16)
    raise AssertionError(f"nothing listens on port {port}")


def test_half_heads_are_closed_within_the_header_timeout(edge_server: Server) -> None:
    http = httpx.Client(timeout=10)
    timed_chat(http, edge_server.url)  # warm
    opened: dict[socket.socket, float] = {}
    try:
        for _ in range(2000):
            sock = socket.create_connection(("127.0.0.1", edge_server.port), timeout=10)
            sock.sendall(HALF_HEAD)
            opened[sock] = time.monotonic()
        # From here the server holds all 2,000 (their head timers run from the accept).
        assert wait_until(lambda: accept_backlog(edge_server.port) == 0, 20, step=0.01)
        accepted = time.monotonic()
        latencies = [timed_chat(http, edge_server.url) for _ in range(5)]
        health = http.get(f"{edge_server.url}/health")
        during = time.monotonic() - accepted
        assert during < HEADER_TIMEOUT_S / 2, f"the requests took {during:.2f} s"
        assert health.status_code == 200
        assert statistics.median(latencies) < UNBLOCKED_S, latencies
        closed = wait_closed(list(opened), HEADER_TIMEOUT_S + SLACK_S)
        assert len(closed) == len(opened), f"{len(opened) - len(closed)} of 2000 still open"
        last = max(closed.values()) - accepted
        assert last < HEADER_TIMEOUT_S + SLACK_S, f"one stayed open {last:.2f} s after accept"
        first = min(closed[sock] - opened[sock] for sock in closed)
        assert first > HEADER_TIMEOUT_S * 0.9, f"one was closed after {first:.2f} s"
        assert timed_chat(http, edge_server.url) < UNBLOCKED_S
    finally:
        http.close()
        for sock in opened:
            sock.close()


def test_a_100_kib_header_gets_431(edge_server: Server) -> None:
    big = httpx.get(f"{edge_server.url}/v1/models", headers={"x-big": "a" * 100 * 1024},
                    timeout=10)
    assert big.status_code == 431, big.text
    fits = httpx.get(f"{edge_server.url}/v1/models", headers={"x-big": "a" * 60 * 1024},
                     timeout=10)
    assert fits.status_code == 200, fits.text
    assert httpx.get(f"{edge_server.url}/health", timeout=5).status_code == 200


def read_response(sock: socket.socket) -> bytes:
    """One whole response with a content-length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"closed mid-response: {data!r}"
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    return head


def test_an_idle_kept_alive_connection_is_closed(edge_server: Server) -> None:
    with socket.create_connection(("127.0.0.1", edge_server.port), timeout=10) as sock:
        for _ in range(2):  # kept alive between requests that come in time
            sock.sendall(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200")
            time.sleep(KEEP_ALIVE_S / 4)
        idle_since = time.monotonic() - KEEP_ALIVE_S / 4
        closed = wait_closed([sock], KEEP_ALIVE_S + SLACK_S + 1)
        assert sock in closed, "an idle kept-alive connection stayed open"
        assert KEEP_ALIVE_S * 0.5 < closed[sock] - idle_since < KEEP_ALIVE_S + SLACK_S


HEALTH = b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n"


@pytest.mark.parametrize("mode", ROUTE_MODES)
def test_max_connections_holds_the_next_connection_until_one_closes(
        mode: str, demo_model: Path, tmp_path: Path) -> None:
    server = Server(mode, demo_model, tmp_path / f"{mode}.log",
                    cli_args=("--max-connections", "2"))
    held: list[socket.socket] = []
    try:
        for _ in range(2):  # two kept-alive connections, each answered once
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(HEALTH)
            assert read_response(sock).startswith(b"HTTP/1.1 200")
            held.append(sock)
        waiting = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        held.append(waiting)
        waiting.sendall(HEALTH)
        assert wait_until(lambda: accept_backlog(server.port) == 1, 10, step=0.01), (
            "the third connection was not left in the backlog")
        waiting.settimeout(0.5)
        with pytest.raises(TimeoutError):
            waiting.recv(1)  # nothing is answered while two connections are open
        held[0].close()
        waiting.settimeout(10)
        assert read_response(waiting).startswith(b"HTTP/1.1 200")
        assert accept_backlog(server.port) == 0
    finally:
        for sock in held:
            sock.close()
        assert server.stop() == 0, server.log()
