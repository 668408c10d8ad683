"""The HTTP edge of the Python frontend, as plain ASGI: the request body under its limit,
JSON responses and error bodies (in the route's error dialect), the API key, and the
dispatcher that routes a request, answering 401 / 404 / 405 and our own bugs (500).
As ``rust/server/src/edge/`` and ``routes.rs``'s guard and fallbacks."""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from server import openai as s
from server.error import APIError, Dialect, ErrorKind, payload_too_large
from server.metrics import Metrics

logger = logging.getLogger("vrs.frontend")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]
Routes = dict[str, tuple[str | tuple[str, ...], Handler]]

MAX_BODY_BYTES = 32 * 1024 * 1024
_encode = msgspec.json.Encoder().encode
_JSON = (b"content-type", b"application/json")


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


async def read_body(receive: Receive, limit: int = MAX_BODY_BYTES,
                    flag: str | None = None) -> bytes:
    """The request body, ``limit`` bytes at most (413 above it, naming ``flag``, the option
    that sets the limit, when there is one)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise payload_too_large(limit, flag)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(send: Send, status: int, body: bytes,
                    extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [_JSON, (b"content-length", str(len(body)).encode()), *(extra or ())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, error: APIError,
                     extra: list[tuple[bytes, bytes]] | None = None,
                     dialect: Dialect = Dialect.OPENAI) -> None:
    await send_json(send, error.status_in(dialect), error.to_json(dialect),
                    [*error.headers, *(extra or ())])


def model_list(name: str, created: int, root: str, max_model_len: int) -> bytes:
    """The ``GET /v1/models`` body: the one served model."""
    card = s.ModelCard(id=name, created=created, root=root, max_model_len=max_model_len)
    return _encode(s.ModelList(data=[card]))


def authorized(scope: Scope, api_key: bytes) -> bool:
    """Whether the request carries ``Authorization: Bearer <api_key>`` or, as Anthropic's
    clients send it, ``x-api-key: <api_key>`` (constant time)."""
    bearer = given = b""
    for name, value in scope["headers"]:
        if name == b"authorization" and not bearer:
            bearer = value
        elif name == b"x-api-key" and not given:
            given = value
    by_bearer = hmac.compare_digest(bearer, b"Bearer " + api_key)
    by_header = hmac.compare_digest(given, api_key)
    return by_bearer | by_header


def find_route(routes: Routes, path: str) -> tuple[str | tuple[str, ...], Handler] | None:
    """The route at ``path``: its exact entry, else the entry of the longest key ending in
    ``/`` that ``path`` extends (``/v1/responses/`` serves ``/v1/responses/{id}...``)."""
    route = routes.get(path)
    if route is not None:
        return route
    best = ""
    for key in routes:
        if key.endswith("/") and path.startswith(key) and len(path) > len(key) \
                and len(key) > len(best):
            best = key
    return routes[best] if best else None


def protected(path: str) -> bool:
    """Whether ``path`` needs the API key: ``/v1/*``, and ``/invocations`` (it generates;
    vLLM guards it too). As ``protected`` in ``rust/server/src/edge/auth.rs``."""
    return path.startswith("/v1/") or path == "/invocations"


async def dispatch(routes: Routes, scope: Scope,
                   receive: Receive,
                   send: Send, api_key: bytes | None = None,
                   metrics: Metrics | None = None) -> None:
    """Routes one ASGI request: 401 without the API key on /v1/*, JSON 404 / 405,
    APIError bodies (in the path's dialect), 500 for our own bugs; counts it in
    ``metrics``."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    status = [0]
    if metrics is not None:
        inner = send

        def send(message: dict[str, Any]) -> Awaitable[None]:
            # Not a coroutine of its own: a streamed token's body goes straight to the
            # server's send, with no extra frame per message.
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            return inner(message)

    route = find_route(routes, path)
    dialect = Dialect.for_path(path)
    try:
        if api_key is not None and protected(path) and not authorized(scope, api_key):
            raise APIError(ErrorKind.UNAUTHORIZED, "invalid or missing API key: send "
                           "`Authorization: Bearer <key>` or `x-api-key: <key>`",
                           headers=[(b"www-authenticate", b"Bearer")])
        if route is None:
            raise APIError(ErrorKind.NOT_FOUND, f"Not Found: {path}")
        method, handler = route
        methods = allowed_methods(method)
        if scope["method"] not in methods:
            await send_error(send, APIError(ErrorKind.METHOD_NOT_ALLOWED,
                                            f"Method Not Allowed: {scope['method']} {path}"),
                             [(b"allow", ",".join(methods).encode())], dialect)
            return
        await handler(scope, receive, send)
    except APIError as error:
        await send_error(send, error, dialect=dialect)
    except ClientGone:
        return
    except Exception:  # our bug: a 500 with the error body, if the response has not begun
        logger.exception("internal error on %s %s", scope["method"], path)
        with contextlib.suppress(Exception):
            await send_error(send, APIError(ErrorKind.INTERNAL, "internal server error"),
                             dialect=dialect)
    finally:
        if metrics is not None and status[0]:
            metrics.request(path, status[0])


def allowed_methods(method: str | tuple[str, ...]) -> tuple[str, ...]:
    """A route's methods, HEAD after GET (uvicorn sends no body for HEAD), in the order
    of the ``Allow`` header vrs-rs (axum) sends."""
    methods = (method,) if isinstance(method, str) else method
    out: list[str] = []
    for name in methods:
        out.append(name)
        if name == "GET":
            out.append("HEAD")
    return tuple(out)


