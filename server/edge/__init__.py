"""The HTTP edge: what every request meets before and after its endpoint, as plain ASGI:
the ASGI types, JSON responses and a route's methods here; the body limit (``body``), the
API key (``auth``), admission (``admission``), errors (``error``), the queue, metrics,
traces, the listener and the browser-facing middleware in the modules below.
Rust: rust/server/src/edge.rs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]

_JSON = (b"content-type", b"application/json")


async def send_json(send: Send, status: int, body: bytes,
                    extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [_JSON, (b"content-length", str(len(body)).encode()), *(extra or ())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


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


