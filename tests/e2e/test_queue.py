"""The bounded queue in the request modes (servers.ROUTE_MODES), on the mock engine that
runs at most ``--max-num-seqs`` requests and queues the rest as the real scheduler does:
beyond ``--max-num-queued-reqs`` a request gets 503 with ``Retry-After`` and the admitted
ones all complete; ``--max-queue-wait`` aborts a request still waiting (503 before any
byte, an SSE error event once its stream started) and the server ends idle; ``/metrics``
counts each refusal by reason. On the real engine: after a queue-wait abort every KV
block is free again."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.e2e.servers import MODEL, REAL_ENGINE_ARGS, ROUTE_MODES, Server, wait_until

pytestmark = pytest.mark.e2e

STEP_S = 0.5
WAIT_S = 2.0
RUNNING = 'vrs:num_requests_running{engine="0"}'
WAITING = 'vrs:num_requests_waiting{engine="0"}'
KV_USAGE = 'vrs:kv_cache_usage_perc{engine="0"}'


def rejected(reason: str) -> str:
    return f'vrs:requests_rejected_total{{reason="{reason}"}}'


@pytest.fixture(scope="module", params=ROUTE_MODES)
def queued(request: pytest.FixtureRequest, demo_model: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """2 running at a time, 500 ms per step, at most 3 engine requests queued, 2 s of
    waiting at most; one per request mode for the module (each test leaves it idle)."""
    log = tmp_path_factory.mktemp("queued") / "server.log"
    server = Server(request.param, demo_model, log, cli_args=(
        "--max-num-seqs", "2", "--mock-step-delay-ms", str(int(STEP_S * 1000)),
        "--max-num-queued-reqs", "3", "--max-queue-wait", str(WAIT_S)))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def metric(server: Server, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def idle(server: Server) -> bool:
    load = httpx.get(f"{server.url}/load", timeout=10).json()["server_load"]
    return load == 0 and metric(server, RUNNING) == 0 and metric(server, WAITING) == 0


def completion(server: Server, max_tokens: int, **extra: object) -> httpx.Response:
    return httpx.post(f"{server.url}/v1/completions", timeout=60,
                      json={"model": MODEL, "prompt": "hello", "max_tokens": max_tokens,
                            "ignore_eos": True, **extra})


def test_beyond_the_queue_bound_503_and_the_admitted_complete(queued: Server) -> None:
    before = metric(queued, rejected("queue_full_requests"))
    barrier = threading.Barrier(8)

    def send(_: int) -> httpx.Response:
        barrier.wait()
        return completion(queued, 1)  # one step each: the third admitted starts in time

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(send, range(8)))
    done = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code != 200]
    assert len(done) >= 3, [r.text for r in responses]
    assert refused, "8 requests at once, within one 500 ms step: the queue holds 3"
    for response in refused:
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"] == "1"
        error = response.json()["error"]
        assert error["type"] == "ServiceUnavailableError"
        assert "--max-num-queued-reqs" in error["message"], error
    for response in done:
        assert response.json()["usage"]["completion_tokens"] == 1
    assert metric(queued, rejected("queue_full_requests")) == before + len(refused)
    assert wait_until(lambda: idle(queued), 10)


def test_max_queue_wait_aborts_the_waiting_requests(queued: Server) -> None:
    before = metric(queued, rejected("queue_wait_timeout"))
    with httpx.Client(timeout=60) as client:
        body = {"model": MODEL, "prompt": "hello", "max_tokens": 40, "ignore_eos": True,
                "stream": True}
        long_streams = []
        for _ in range(2):  # the engine's two slots, for 20 s
            request = client.build_request("POST", f"{queued.url}/v1/completions", json=body)
            response = client.send(request, stream=True)
            assert response.status_code == 200
            long_streams.append((response, response.iter_lines()))
        for _, lines in long_streams:  # each has its first token: out of the queue
            assert next(line for line in lines if line).startswith("data: ")
        results: dict[str, object] = {}

        def whole() -> None:
            results["whole"] = completion(queued, 2)

        def streamed() -> None:
            response = httpx.post(f"{queued.url}/v1/completions", timeout=60,
                                  json={**body, "max_tokens": 2})
            results["stream"] = response

        started = time.monotonic()
        threads = [threading.Thread(target=whole), threading.Thread(target=streamed)]
        for thread in threads:
            thread.start()
        assert wait_until(lambda: metric(queued, WAITING) == 2, 5), (
            "the mock engine reports the requests beyond --max-num-seqs as waiting")
        assert metric(queued, RUNNING) == 2
        for thread in threads:
            thread.join(30)
        elapsed = time.monotonic() - started
        assert WAIT_S - 0.1 < elapsed < WAIT_S + 2, elapsed
        refused = results["whole"]
        assert isinstance(refused, httpx.Response)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        message = refused.json()["error"]["message"]
        assert f"{WAIT_S:g} s" in message and "--max-queue-wait" in message, message
        stream = results["stream"]
        assert isinstance(stream, httpx.Response)
        assert stream.status_code == 200, "the stream had started: the error is an event"
        events = [line for line in stream.text.split("\n") if line]
        assert events[-1] == "data: [DONE]", events
        error = json.loads(events[-2].removeprefix("data: "))["error"]
        assert error["code"] == 503 and "--max-queue-wait" in error["message"], error
        assert wait_until(lambda: metric(queued, WAITING) == 0, 3), (
            "the engine dropped both waiting requests")
        assert metric(queued, RUNNING) == 2, "the running requests go on"
        for response, _ in long_streams:
            response.close()  # a client that goes away aborts its request
    assert wait_until(lambda: idle(queued), 10), "/load and the engine back to 0"
    assert metric(queued, rejected("queue_wait_timeout")) == before + 2


@pytest.fixture(scope="module", params=ROUTE_MODES)
def real_queued(request: pytest.FixtureRequest, demo_model: Path,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The demo model on the real engine, one request at a time, 0.5 s of waiting."""
    log = tmp_path_factory.mktemp("real-queued") / "server.log"
    server = Server(request.param, demo_model, log, mock=False, cli_args=(
        *REAL_ENGINE_ARGS, "--max-num-seqs", "1", "--max-queue-wait", "0.5"))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def test_real_engine_frees_every_block_after_a_queue_wait_abort(real_queued: Server) -> None:
    """A long request holds the only slot; one behind it (a long prompt, prefilled in
    chunks once it runs) waits past the limit and is aborted: 503; once the long one is
    gone too, the engine runs and queues nothing and every KV block is free."""
    body = {"model": MODEL, "prompt": "hello", "max_tokens": 1800, "ignore_eos": True,
            "stream": True}
    with httpx.Client(timeout=60) as client:
        request = client.build_request("POST", f"{real_queued.url}/v1/completions", json=body)
        blocker = client.send(request, stream=True)
        assert blocker.status_code == 200
        lines = blocker.iter_lines()  # held: a dropped line iterator closes the response
        assert next(line for line in lines if line).startswith("data: ")
        assert wait_until(lambda: metric(real_queued, KV_USAGE) > 0, 5)
        refused = httpx.post(f"{real_queued.url}/v1/completions", timeout=60,
                             json={"model": MODEL, "prompt": "hello " * 600, "max_tokens": 4})
        assert refused.status_code == 503, refused.text
        assert "--max-queue-wait" in refused.json()["error"]["message"]
        assert wait_until(lambda: metric(real_queued, WAITING) == 0, 5)
        blocker.close()
    assert wait_until(lambda: idle(real_queued), 20)
    assert wait_until(lambda: metric(real_queued, KV_USAGE) == 0.0, 10), (
        "num_free_blocks is back to the total")
