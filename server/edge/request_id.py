"""Request ids (``--enable-request-id-headers``), as ``rust/server/src/edge/request_id.rs``:
:class:`RequestIds` is the ASGI middleware; it makes the id the request's :func:`current` one
while its handler runs, so that the response body's id, the ``accepted`` log line and the
engine request id (:func:`engine_id`, a fresh suffix on a client's id) carry it.
Behaviour: docs/api.md, "Request ids".
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Any

import msgspec

from server.edge import Handler, Receive, Scope, Send

HEADER = b"x-request-id"
MAX_LEN = 128
_VALID = re.compile(rb"[!-~]{1,%d}" % MAX_LEN)


class RequestId(msgspec.Struct, frozen=True):
    """A request's id; ``from_client``: the client's ``X-Request-Id`` (not unique: clients
    may reuse one)."""

    value: str
    from_client: bool


_current: ContextVar[RequestId | None] = ContextVar("vrs_request_id", default=None)


def fresh() -> str:
    """A fresh id: 32 hex digits."""
    return uuid.uuid4().hex


def valid(value: bytes) -> bool:
    """Whether a client's id is usable as given: 1 to MAX_LEN visible ASCII characters."""
    return _VALID.fullmatch(value) is not None


def of(headers: list[tuple[bytes, bytes]]) -> RequestId:
    """The id of a request with these (ASGI) headers: its ``X-Request-Id`` when
    :func:`valid`, else a fresh one."""
    for name, value in headers:
        if name == HEADER:
            if valid(value):
                return RequestId(value.decode("ascii"), True)
            break
    return RequestId(fresh(), False)


def current() -> RequestId | None:
    """The id of the request being handled, when request ids are on."""
    return _current.get()


def engine_id(prefix: str) -> tuple[str, str]:
    """``(public id, engine request id)`` of a request whose ids start with ``prefix``: the
    public id is ``<prefix>-<id>`` with the :func:`current` id (a fresh one when request ids
    are off); the engine's is the same when the id is fresh, and
    ``<prefix>-<id>-<32 hex digits>`` when the client chose it."""
    rid = _current.get()
    if rid is None:
        public = f"{prefix}-{fresh()}"
        return public, public
    public = f"{prefix}-{rid.value}"
    return public, f"{public}-{fresh()}" if rid.from_client else public


def public_id(prefix: str) -> str:
    """The public id ``<prefix>-<id>`` of the :func:`current` request (fresh when request
    ids are off): what the render service answers as ``request_id``."""
    rid = _current.get()
    return f"{prefix}-{rid.value if rid is not None else fresh()}"


class RequestIds:
    """The middleware: the request's id (:func:`of`) is :func:`current` while ``app``
    handles it and comes back in the response's ``X-Request-Id``."""

    def __init__(self, app: Handler) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = of(scope["headers"])
        header = (HEADER, rid.value.encode("ascii"))

        def send_with_id(message: dict[str, Any]) -> Awaitable[None]:
            # No coroutine of its own: a body message goes straight to ``send``.
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), header]}
            return send(message)

        token = _current.set(rid)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _current.reset(token)
