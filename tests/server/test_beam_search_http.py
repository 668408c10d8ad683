"""A beam search's lifetime over HTTP (the Python server in-process, the mock engine paced
at 20 ms a step, a search of 20 s): ``--request-timeout`` covers the whole search (504),
and a client that goes away ends it: no step is sent after, long before the search would
have ended. vrs-rs: rust/server/src/routes/tests/beam_search.rs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

# 1000 steps of 20 ms: 20 s of search unless something ends it.
LONG = {"model": MODEL, "prompt": "hello", "max_tokens": 1000, "n": 2,
        "use_beam_search": True, "ignore_eos": True}


def paced_server(root: Path, demo_model: Path, **args: object) -> PythonServer:
    return PythonServer(demo_model, root / "server.log", engine={"mock_step_delay_ms": 20.0},
                        **args)


@pytest.fixture(scope="module")
def timed(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonServer]:
    server = paced_server(tmp_path_factory.mktemp("beam-timed"), demo_model,
                          request_timeout=1.0)
    yield server
    assert server.stop() == 0, server.log()


@pytest.fixture(scope="module")
def untimed(demo_model: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonServer]:
    server = paced_server(tmp_path_factory.mktemp("beam-untimed"), demo_model)
    yield server
    assert server.stop() == 0, server.log()


def routed(server: PythonServer) -> int:
    """Engine requests sent so far (a search's steps included)."""
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    prefix = 'vrs:engine_requests_routed_total{engine="0"} '
    return next(int(line.removeprefix(prefix)) for line in text.splitlines()
                if line.startswith(prefix))


def in_flight(server: PythonServer) -> int:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    return next(int(line.split()[1]) for line in text.splitlines()
                if line.startswith("vrs:requests_in_flight "))


def stops_sending(server: PythonServer, within: float) -> bool:
    """Whether the server has no request in flight and sends the engine nothing for half
    a second, within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        before = routed(server)
        time.sleep(0.5)
        if in_flight(server) == 0 and routed(server) == before:
            return True
    return False


def test_the_request_timeout_covers_the_search(timed: PythonServer) -> None:
    started = time.monotonic()
    response = httpx.post(f"{timed.url}/v1/completions", json=LONG, timeout=30)
    assert response.status_code == 504, response.text
    assert response.json()["error"]["type"] == "TimeoutError"
    assert time.monotonic() - started < 10.0
    assert stops_sending(timed, 5.0)
    short = {**LONG, "max_tokens": 3}
    answer = httpx.post(f"{timed.url}/v1/completions", json=short, timeout=30).json()
    assert [c["finish_reason"] for c in answer["choices"]] == ["length", "length"]


def test_a_client_that_goes_away_ends_the_search(untimed: PythonServer) -> None:
    before = routed(untimed)
    seen: list[int] = []
    watcher = threading.Timer(0.3, lambda: seen.append(routed(untimed)))
    watcher.start()
    started = time.monotonic()
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{untimed.url}/v1/completions", json=LONG, timeout=0.6)
    watcher.join()
    assert seen and seen[0] > before, "the search was sending steps before the client left"
    assert stops_sending(untimed, 5.0)
    assert time.monotonic() - started < 10.0, "ended long before the search would have"
