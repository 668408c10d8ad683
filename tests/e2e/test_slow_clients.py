"""Slow and greedy clients (``--header-read-timeout``, ``--h11-max-incomplete-event-size``,
``--http-timeout-keep-alive``) in the request modes: 2,000 connections that send half a
request head are all closed within the head timeout while a normal request takes under
100 ms and /health answers; a 100 KiB header gets 431 (a 60 KiB one is served); an idle
kept-alive connection is closed after the keep-alive timeout. ``--max-connections``:
tests/server/test_connection.py and the Rust listener's tests."""

from __future__ import annotations

import selectors
import socket
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from servers import MODEL, ROUTE_MODES, Server

HEADER_TIMEOUT_S = 3.0
KEEP_ALIVE_S = 1.0
SLACK_S = 1.5  # two shared cores: timers fire late, closes take a while
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


def timed_chat(url: str) -> float:
    """Seconds for one chat completion on a fresh connection."""
    started = time.perf_counter()
    response = httpx.post(f"{url}/v1/chat/completions", json=CHAT, timeout=10)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    return elapsed


def wait_closed(socks: dict[socket.socket, float], timeout: float) -> dict[socket.socket, float]:
    """Wait until the server closes each socket (EOF or reset); returns the seconds each
    stayed open after its open time (the value in ``socks``); the ones still open are
    missing."""
    selector = selectors.DefaultSelector()
    for sock in socks:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    lasted: dict[socket.socket, float] = {}
    deadline = time.monotonic() + timeout
    while len(lasted) < len(socks) and time.monotonic() < deadline:
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
            lasted[sock] = time.monotonic() - socks[sock]
            selector.unregister(sock)
    selector.close()
    return lasted


def test_half_heads_are_closed_within_the_header_timeout(edge_server: Server) -> None:
    timed_chat(edge_server.url)  # warm
    socks: dict[socket.socket, float] = {}
    try:
        for _ in range(2000):
            sock = socket.create_connection(("127.0.0.1", edge_server.port), timeout=10)
            sock.sendall(HALF_HEAD)
            socks[sock] = time.monotonic()
        opened = time.monotonic()
        latencies = [timed_chat(edge_server.url) for _ in range(5)]
        health = httpx.get(f"{edge_server.url}/health", timeout=5)
        during = time.monotonic() - opened
        assert during < HEADER_TIMEOUT_S / 2, f"the requests took {during:.2f} s"
        assert health.status_code == 200
        assert statistics.median(latencies) < 0.1, latencies
        lasted = wait_closed(socks, HEADER_TIMEOUT_S + SLACK_S + (opened - min(socks.values())))
        assert len(lasted) == len(socks), f"{len(socks) - len(lasted)} of 2000 still open"
        longest = max(lasted.values())
        assert longest < HEADER_TIMEOUT_S + SLACK_S, f"one stayed open {longest:.2f} s"
        assert min(lasted.values()) > HEADER_TIMEOUT_S * 0.5, "closed before the timeout"
    finally:
        for sock in socks:
            sock.close()
    assert timed_chat(edge_server.url) < 1


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
        idle_since = time.monotonic()
        lasted = wait_closed({sock: idle_since}, KEEP_ALIVE_S + SLACK_S + 1)
        assert sock in lasted, "an idle kept-alive connection stayed open"
        assert KEEP_ALIVE_S * 0.5 < lasted[sock] + KEEP_ALIVE_S / 4 < KEEP_ALIVE_S + SLACK_S
