"""Kept-alive connections to the Python frontend (in-process, the mock engine) after answers
that do not need the request's body: a 404 or 405 to a POST with a body, the body sent
with the head or after the answer, leaves the connection serving the next request
(docs/api.md, "Connection limits"; vrs-rs: rust/server/src/routes/tests/loopback.rs)."""

from __future__ import annotations

import httpx
import pytest

from tests.http1 import connect
from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi " * 200}],
        "max_tokens": 1}
GOOD = {"model": MODEL, "prompt": "hi", "max_tokens": 1}


def test_error_answers_keep_the_connection(python_server: PythonServer) -> None:
    conn = connect(python_server.url)
    try:
        for i in range(10):
            pause = 0.02 if i % 2 else 0.0
            missing = conn.request("POST", "/v1/no-such-route", CHAT, pause=pause)
            assert (missing.status, missing.closes) == (404, False), missing.headers
            wrong = conn.request("POST", "/v1/models", CHAT, pause=pause)
            assert (wrong.status, wrong.closes) == (405, False), wrong.headers
            assert wrong.headers["allow"] == "GET,HEAD"
            good = conn.request("POST", "/v1/completions", GOOD)
            assert (good.status, good.closes) == (200, False), good.body
    finally:
        conn.close()


def test_httpx_loop_on_one_connection(python_server: PythonServer) -> None:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=python_server.url, limits=limits, timeout=30) as client:
        for _ in range(30):
            assert client.post("/v1/no-such-route", json=CHAT).status_code == 404
            assert client.post("/v1/models", json=CHAT).status_code == 405
            assert client.post("/v1/completions", json=GOOD).status_code == 200
