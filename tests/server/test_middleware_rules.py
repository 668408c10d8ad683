"""The browser-facing middleware as plain ASGI (server/edge/cors.py, server/edge/request_id.py,
server/edge/middleware.py) and the SSE keep-alive of server/output/sse.py, without a server:
the same headers vrs-rs's tower-http layer sends (rust/server/src/edge/cors.rs tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from server.edge import request_id
from server.edge.cors import Cors, CorsSettings, check
from server.edge.middleware import wrap
from server.output.sse import keep_alive

pytestmark = pytest.mark.unit

Headers = dict[bytes, bytes]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A route: 200 with the request id it saw (``-`` when request ids are off)."""
    current = request_id.current()
    body = current.value.encode() if current is not None else b"-"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})


def call(handler: Any, method: str, headers: Headers) -> tuple[int, Headers, bytes]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/v1/x",
             "headers": list(headers.items())}
    asyncio.run(handler(scope, receive, send))
    start = sent[0]
    return start["status"], dict(start["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


PREFLIGHT = {b"origin": b"https://a.example", b"access-control-request-method": b"POST",
             b"access-control-request-headers": b"authorization,content-type"}


def test_defaults_allow_any_origin() -> None:
    handler = Cors(app, CorsSettings())
    status, headers, body = call(handler, "OPTIONS", PREFLIGHT)
    assert (status, body) == (200, b"")
    assert headers[b"access-control-allow-origin"] == b"*"
    assert headers[b"access-control-allow-methods"] == b"DELETE,GET,HEAD,OPTIONS,PATCH,POST,PUT"
    assert headers[b"access-control-allow-headers"] == b"authorization,content-type"
    assert headers[b"access-control-max-age"] == b"600"
    assert b"access-control-allow-credentials" not in headers
    status, headers, body = call(handler, "POST", {b"origin": b"https://a.example"})
    assert (status, body) == (200, b"-")
    assert headers[b"access-control-allow-origin"] == b"*"
    assert headers[b"vary"] == b"access-control-request-headers"
    # No Origin: not a CORS request; an OPTIONS goes to the routes.
    _, headers, body = call(handler, "OPTIONS", {})
    assert body == b"-" and not any(k.startswith(b"access-control") for k in headers)


def test_a_list_allows_its_origins_only() -> None:
    handler = Cors(app, CorsSettings(allowed_origins=["https://a.example"],
                                     allowed_methods=["GET", "POST"],
                                     allowed_headers=["Authorization"], allow_credentials=True,
                                     expose_request_id=True))
    _, headers, _ = call(handler, "OPTIONS", PREFLIGHT)
    assert headers[b"access-control-allow-origin"] == b"https://a.example"
    assert headers[b"access-control-allow-methods"] == b"GET,POST"
    assert headers[b"access-control-allow-headers"] == (
        b"accept,accept-language,authorization,content-language,content-type")
    assert headers[b"access-control-allow-credentials"] == b"true"
    _, headers, _ = call(handler, "OPTIONS", {**PREFLIGHT, b"origin": b"https://evil.example"})
    assert b"access-control-allow-origin" not in headers
    _, headers, _ = call(handler, "POST", {b"origin": b"https://a.example"})
    assert headers[b"access-control-allow-origin"] == b"https://a.example"
    assert headers[b"access-control-expose-headers"] == b"x-request-id"
    assert headers[b"vary"] == b"origin"


def test_any_origin_with_credentials_mirrors_it() -> None:
    handler = Cors(app, CorsSettings(allow_credentials=True))
    _, headers, _ = call(handler, "OPTIONS", PREFLIGHT)
    assert headers[b"access-control-allow-origin"] == b"https://a.example"
    assert headers[b"access-control-allow-credentials"] == b"true"


@pytest.mark.parametrize(("field", "value", "flag"), [
    ("allowed_origins", "https://a\nb", "--allowed-origins"),
    ("allowed_methods", "PO ST", "--allowed-methods"),
    ("allowed_headers", "bad header", "--allowed-headers"),
])
def test_bad_values_name_their_flag(field: str, value: str, flag: str) -> None:
    with pytest.raises(ValueError, match=f"^{flag}"):
        check(CorsSettings(**{field: [value]}))


def test_request_ids_client_or_fresh() -> None:
    handler = wrap(app, CorsSettings(), request_ids=True)
    _, headers, body = call(handler, "GET", {b"x-request-id": b"client-7"})
    assert headers[b"x-request-id"] == body == b"client-7"
    for bad in (b"x" * 129, b"two words", b"", b"tab\there", "café".encode()):
        _, headers, body = call(handler, "GET", {b"x-request-id": bad})
        assert headers[b"x-request-id"] == body and len(body) == 32, bad
        int(body, 16)
    _, headers, body = call(handler, "GET", {b"x-request-id": b"y" * 128})
    assert body == b"y" * 128
    _, headers, body = call(wrap(app, CorsSettings(), request_ids=False), "GET",
                            {b"x-request-id": b"client-7"})
    assert body == b"-" and b"x-request-id" not in headers


def test_a_reused_client_id_gets_unique_engine_ids() -> None:
    assert request_id.current() is None
    public, engine = request_id.engine_id("cmpl")
    assert public == engine and len(public) == 5 + 32
    token = request_id._current.set(request_id.RequestId("same", True))
    try:
        ids = [request_id.engine_id("chatcmpl") for _ in range(100)]
        assert {public for public, _ in ids} == {"chatcmpl-same"}
        assert len({engine for _, engine in ids}) == 100
        assert all(e.startswith("chatcmpl-same-") and len(e) == 14 + 32 for _, e in ids)
        assert request_id.public_id("chatcmpl") == "chatcmpl-same"
    finally:
        request_id._current.reset(token)
    token = request_id._current.set(request_id.RequestId("f" * 32, False))
    try:
        assert request_id.engine_id("cmpl") == ("cmpl-" + "f" * 32,) * 2
    finally:
        request_id._current.reset(token)


def test_keep_alive_fills_silences_only() -> None:
    async def items() -> AsyncIterator[str]:
        for delay, item in ((0.0, "a"), (0.35, "b"), (0.0, "c")):
            await asyncio.sleep(delay)
            yield item

    async def collect(every: float | None) -> list[str | None]:
        return [item async for item in keep_alive(items(), every)]

    got = asyncio.run(collect(0.1))
    assert got[0] == "a" and got[-2:] == ["b", "c"], got
    assert len(got) >= 4 and all(item is None for item in got[1:-2]), got
    assert asyncio.run(collect(None)) == ["a", "b", "c"]
