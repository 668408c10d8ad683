"""Hardening in the request modes (servers.ROUTE_MODES): the API key, the body limit,
admission (429), the request timeout, clients that disconnect or stop reading — each case
checks the server's state afterwards (/load back to 0, the engine running nothing, the
server answering)."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.e2e.servers import MODEL, ROUTE_MODES, Server, wait_until
from tests.http1 import closed, connect

pytestmark = pytest.mark.e2e

KEY = "sk-test-0123456789"
AUTH = {"authorization": f"Bearer {KEY}"}
RUNNING = 'vrs:num_requests_running{engine="0"}'


@pytest.fixture(scope="module", params=ROUTE_MODES)
def guarded(request: pytest.FixtureRequest, demo_model: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """API key, 64 KiB bodies, 2 requests at a time, 1.5 s per request, 2 ms per step; one
    per request mode for the module (each test leaves it idle, and checks that it does)."""
    log = tmp_path_factory.mktemp("guarded") / "server.log"
    server = Server(request.param, demo_model, log, cli_args=(
        "--api-key", KEY, "--max-request-body", "64KiB", "--max-concurrent-requests", "2",
        "--request-timeout", "1.5", "--mock-step-delay-ms", "2"))
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def metric(server: Server, name: str) -> float:
    text = httpx.get(f"{server.url}/metrics", timeout=10).text
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


def load(server: Server) -> int:
    return int(httpx.get(f"{server.url}/load", timeout=10).json()["server_load"])


def idle(server: Server) -> bool:
    return load(server) == 0 and metric(server, RUNNING) == 0


def test_api_key_guards_v1_and_invocations(guarded: Server) -> None:
    url = guarded.url
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": KEY}):
        response = httpx.get(f"{url}/v1/models", headers=headers)
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == "Bearer"
        error = response.json()["error"]
        assert (error["type"], error["code"]) == ("AuthenticationError", 401)
    post = httpx.post(f"{url}/v1/completions", json={"prompt": "x", "max_tokens": 1})
    assert post.status_code == 401
    assert httpx.get(f"{url}/v1/nothing/here").status_code == 401, "before routing"
    assert httpx.get(f"{url}/v1/models", headers=AUTH).status_code == 200
    for path in ("/health", "/metrics", "/load", "/version"):
        assert httpx.get(f"{url}{path}").status_code == 200, path
    assert httpx.post(f"{url}/tokenize", json={"prompt": "x"}).status_code == 200
    for method in ("GET", "POST"):  # SageMaker's health check stays open, as in vLLM
        assert httpx.request(method, f"{url}/ping").status_code == 200, method
    invocation = {"prompt": "x", "max_tokens": 1}  # it generates: guarded, as in vLLM
    assert httpx.post(f"{url}/invocations", json=invocation).status_code == 401
    assert httpx.post(f"{url}/invocations", json=invocation, headers=AUTH).status_code == 200
    with pytest.raises(openai.AuthenticationError):
        guarded.client().models.list()
    client = openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)
    assert client.completions.create(model=MODEL, prompt="hi", max_tokens=2).usage
    assert metric(guarded, 'vrs:http_requests_total{endpoint="/v1/models",status="401"}') >= 4


def test_body_limit(guarded: Server) -> None:
    big = json.dumps({"prompt": "a" * 70_000, "max_tokens": 1}).encode()
    for path in ("/v1/completions", "/invocations", "/tokenize"):
        response = httpx.post(f"{guarded.url}{path}", content=big, headers={
            **AUTH, "content-type": "application/json"})
        assert response.status_code == 413, response.text
        error = response.json()["error"]
        assert (error["type"], error["param"]) == ("PayloadTooLargeError", None)
        assert error["message"] == ("request body is larger than the limit of 0.0625 MiB "
                                    "(0.0625 MiB = 65536 bytes); raise --max-request-body")
    ok = json.dumps({"prompt": "a " * 1000, "max_tokens": 1}).encode()
    assert httpx.post(f"{guarded.url}/v1/completions", content=ok, headers={
        **AUTH, "content-type": "application/json"}).status_code == 200


def test_refusals_keep_the_connection(guarded: Server) -> None:
    """On one kept-alive connection, bodies sent at once or 20 ms after the head: the
    API key's 401 and a 404 read the body first and keep the connection; a body over the
    limit (413) either keeps it too (the Python server skips the rest of the body) or says
    `Connection: close` and closes it (vrs-rs): never a connection dropped unannounced."""
    body = {"prompt": "x", "max_tokens": 1}
    conn = connect(guarded.url)
    for pause in (0.0, 0.02, 0.0, 0.02):
        answer = conn.request("POST", "/v1/completions", body, pause=pause)
        assert (answer.status, answer.closes) == (401, False), answer.headers
        answer = conn.request("POST", "/v1/no-such-route", body, pause=pause, headers=AUTH)
        assert (answer.status, answer.closes) == (404, False), answer.headers
        answer = conn.request("POST", "/v1/completions", body, headers=AUTH)
        assert (answer.status, answer.closes) == (200, False), answer.body
    big = json.dumps({"prompt": "a" * 70_000, "max_tokens": 1}).encode()
    answer = conn.request("POST", "/v1/completions", big, headers=AUTH)
    assert answer.status == 413, answer.body
    if answer.closes:
        assert closed(conn)
        conn.close()
        conn = connect(guarded.url)
    answer = conn.request("POST", "/v1/completions", body, headers=AUTH)
    assert answer.status == 200, answer.body
    conn.close()


def long_stream(server: Server, path: str = "/v1/completions") -> httpx.Response:
    body = {"model": MODEL, "prompt": "go on", "max_tokens": 1900, "ignore_eos": True,
            "stream": True}
    client = httpx.Client(timeout=30)
    request = client.build_request("POST", f"{server.url}{path}", json=body, headers=AUTH)
    return client.send(request, stream=True)


def test_admission_then_timeout(guarded: Server) -> None:
    streams = [long_stream(guarded), long_stream(guarded, "/invocations")]
    assert all(r.status_code == 200 for r in streams)
    assert load(guarded) == 2, "an /invocations stream counts like a generation route"
    rejected = 'vrs:requests_rejected_total{reason="max_concurrent_requests"}'
    before = metric(guarded, rejected)
    for path in ("/v1/completions", "/invocations"):
        refused = httpx.post(f"{guarded.url}{path}", headers=AUTH,
                             json={"model": MODEL, "prompt": "x", "max_tokens": 1})
        assert refused.status_code == 429, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"]["type"] == "TooManyRequestsError"
    assert httpx.get(f"{guarded.url}/v1/models", headers=AUTH).status_code == 200, (
        "only generation requests are admitted")
    assert metric(guarded, rejected) == before + 2, "/metrics counts each 429"
    started = time.monotonic()
    for response in streams:
        events = [line for line in response.iter_lines() if line]
        assert events[-1] == "data: [DONE]"
        error = json.loads(events[-2].removeprefix("data: "))["error"]
        assert (error["code"], error["type"]) == (504, "TimeoutError"), error
        assert "1.5 s" in error["message"]
        response.close()
    assert time.monotonic() - started < 5, "the deadline cut the 4 s streams"
    assert wait_until(lambda: idle(guarded), 10), "admission and engine are free again"
    whole = httpx.post(f"{guarded.url}/v1/completions", headers=AUTH, timeout=30,
                       json={"model": MODEL, "prompt": "x", "max_tokens": 1900,
                             "ignore_eos": True})
    assert whole.status_code == 504 and whole.json()["error"]["type"] == "TimeoutError"
    assert wait_until(lambda: idle(guarded), 10)
    quick = httpx.post(f"{guarded.url}/v1/completions", headers=AUTH, timeout=30,
                       json={"model": MODEL, "prompt": "x", "max_tokens": 3})
    assert quick.status_code == 200


def test_disconnect_aborts_every_choice(server: Server) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "n": 3,
            "max_tokens": 1900, "ignore_eos": True, "stream": True}
    with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=body,
                      timeout=30) as response:
        lines = response.iter_lines()
        for _ in range(10):
            next(lines)
        assert metric(server, RUNNING) >= 1
    assert wait_until(lambda: idle(server), 10), "all three engine requests were aborted"
    assert server.client().completions.create(model=MODEL, prompt="x", max_tokens=2).usage


@pytest.fixture
def slow_reader_server(route_mode: str, demo_model: Path, tmp_path: Path) -> Iterator[Server]:
    # Steps at a model's pace, so outputs keep arriving one step at a time after the
    # client stalls (a mock racing ahead would have all its tokens merged into a few
    # outputs and be finished before eight of them could queue up).
    server = Server(route_mode, demo_model, tmp_path / "server.log",
                    cli_args=("--mock-step-delay-ms", "1"),
                    env={"VRS_MAX_PENDING_OUTPUTS": "8"})
    yield server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def test_a_client_that_stops_reading_is_cut_off(slow_reader_server: Server) -> None:
    server = slow_reader_server
    # About 10 MB of events (8 choices, 20 logprobs a token): more than the socket
    # buffers and the HTTP server's write buffer can hold, so the generation must stall.
    body = json.dumps({"model": MODEL, "prompt": "flood", "max_tokens": 2000, "n": 8,
                       "logprobs": 20, "ignore_eos": True, "stream": True}).encode()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    try:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: "
                     b"application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
        assert wait_until(lambda: "stopped reading" in server.log(), 30), server.log()[-2000:]
        assert wait_until(lambda: metric(server, RUNNING) == 0, 10), "the engine stopped"
        # The response may still be open (its last bytes queued behind the unread ones).
        assert load(server) <= 1
        assert server.client().completions.create(model=MODEL, prompt="x", max_tokens=2)
    finally:
        sock.close()
    assert wait_until(lambda: idle(server), 10)


BAD_BYTES = [
    (b'{"prompt": "\xff\xfe", "max_tokens": 1}', "invalid-utf8"),
    (b'{"prompt": "x", "temperature": NaN}', "nan"),
    (b'{"prompt": "x", "temperature": 1e400}', "huge-float"),
    (b'{"prompt": "x", "max_tokens": -5}', "negative"),
    (b'{"prompt": "x", "max_tokens": 99999999999999999999999}', "huge-int"),
    (b'{"prompt": {"a": 1}}', "wrong-type"),
]


@pytest.mark.parametrize("body", [b for b, _ in BAD_BYTES], ids=[i for _, i in BAD_BYTES])
def test_malformed_input_is_400(server: Server, body: bytes) -> None:
    response = httpx.post(f"{server.url}/v1/completions", content=body,
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "BadRequestError"
