"""Kept-alive connections after answers that do not need the request's body (404, 405), in
the request modes (servers.ROUTE_MODES): the body is read and dropped, so the connection
serves the next request; never a connection dropped without `Connection: close`
(docs/api.md, "Connection limits"). The API key's 401 and the body limit's 413 are in
test_hardening.py (its guarded server)."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.servers import MODEL, Server
from tests.http1 import connect

pytestmark = pytest.mark.e2e

CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi " * 200}],
        "max_tokens": 1}
GOOD = {"model": MODEL, "prompt": "hi", "max_tokens": 1}


def test_error_answers_keep_the_connection(server: Server) -> None:
    """On one connection: a POST with a body to an unknown route (404) and to a GET route
    (405), the body sent at once or 20 ms after the head (the server has answered by then),
    then a good request; every answer arrives and none closes the connection."""
    conn = connect(server.url)
    try:
        for i in range(12):
            pause = 0.02 if i % 2 else 0.0
            missing = conn.request("POST", "/v1/no-such-route", CHAT, pause=pause)
            assert (missing.status, missing.closes) == (404, False), missing.headers
            assert missing.json()["error"]["type"] == "NotFoundError"
            wrong = conn.request("POST", "/v1/models", CHAT, pause=pause)
            assert (wrong.status, wrong.closes) == (405, False), wrong.headers
            good = conn.request("POST", "/v1/completions", GOOD)
            assert (good.status, good.closes) == (200, False), good.body
            assert good.json()["usage"]["completion_tokens"] == 1
    finally:
        conn.close()


def test_httpx_loop_on_one_connection(server: Server) -> None:
    """httpx (the openai SDK's client) with one pooled connection: 404, 405 and a good
    request, 40 times; a dropped kept-alive connection would fail the next request with
    "Server disconnected without sending a response"."""
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    with httpx.Client(base_url=server.url, limits=limits, timeout=30) as client:
        for _ in range(40):
            assert client.post("/v1/no-such-route", json=CHAT).status_code == 404
            assert client.post("/v1/models", json=CHAT).status_code == 405
            answer = client.post("/v1/completions", json=GOOD)
            assert answer.status_code == 200, answer.text
