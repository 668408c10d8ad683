"""The stored-response routes (``GET`` / ``DELETE /v1/responses/{id}``, ``POST
.../cancel``, ``GET .../input_items``) and the background runs of ``POST /v1/responses``
over the store (:mod:`server.routes.responses.store`). Mirrors
``rust/server/src/routes/responses/stored.rs``. Behaviour: docs/api.md, "Responses API:
store and background".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl

import msgspec

from server.edge import Receive, Scope, Send, allowed_methods, send_json
from server.edge.error import APIError, ErrorKind, bad_request
from server.output.sse import SSE_HEADERS
from server.routes.responses.store import (
    ENDING_EVENTS,
    TERMINAL,
    Entry,
    ResponseStore,
    failed,
)

_encode = msgspec.json.Encoder().encode
# The query parameters each route takes.
_QUERY = {"GET": ("stream", "starting_after"), "input_items": ("limit", "order", "after")}


def _query(scope: Scope, route: str) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("latin-1")
    query = dict(parse_qsl(raw, keep_blank_values=True))
    for key in query:
        if key not in _QUERY.get(route, ()):
            raise bad_request(f"unknown query parameter '{key}'", key)
    return query


def _int(query: dict[str, str], key: str, low: int, high: int | None = None) -> int | None:
    value = query.get(key)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if number < low or (high is not None and number > high):
        bound = f"an integer >= {low}" + (f" and <= {high}" if high is not None else "")
        raise bad_request(f"invalid value for '{key}': expected {bound}", key)
    return number


def _bool(query: dict[str, str], key: str) -> bool:
    value = query.get(key, "false").lower()
    if value not in ("true", "false", "1", "0"):
        raise bad_request(f"invalid value for '{key}': expected true or false", key)
    return value in ("true", "1")


async def events_of(entry: Entry, starting_after: int | None) -> AsyncIterator[bytes]:
    """A background stream's events after ``starting_after`` (its sequence numbers count
    from 0), as they come, until the final one (or the run's end)."""
    assert entry.events is not None
    index = 0 if starting_after is None else starting_after + 1
    while True:
        entry.changed.clear()
        while index < len(entry.events):
            event = entry.events[index]
            index += 1
            yield event
            if event.startswith(ENDING_EVENTS):
                return
        if not entry.running():
            return
        await entry.changed.wait()


async def send_events(send: Send, events: AsyncIterator[bytes]) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    async for event in events:
        await send({"type": "http.response.body", "body": event, "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def retrieve(store: ResponseStore, response_id: str, scope: Scope, send: Send) -> None:
    """``GET /v1/responses/{id}``: the response, or (``stream=true``) a background
    stream's events after ``starting_after``."""
    query = _query(scope, "GET")
    stream = _bool(query, "stream")
    starting_after = _int(query, "starting_after", -1)
    entry = store.found(response_id)
    if stream and entry.events is not None:
        await send_events(send, events_of(entry, starting_after))
        return
    if stream and entry.response.get("status") not in TERMINAL:
        raise bad_request("this response was not created with background and stream: "
                          "retrieve it without stream", "stream")
    await send_json(send, 200, _encode(entry.response))


async def cancel(store: ResponseStore, response_id: str) -> bytes:
    """``POST /v1/responses/{id}/cancel``: a background run's end (its engine request
    aborted), status ``cancelled``; vLLM's 400 for one that is not running."""
    entry = store.found(response_id)
    if entry.response.get("status") not in ("queued", "in_progress"):
        raise bad_request("Cannot cancel a synchronous response.", "response_id")
    entry.response["status"] = "cancelled"
    await _stop(entry)
    return _encode(entry.response)


async def _stop(entry: Entry) -> None:
    task = entry.task
    if task is not None and not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    entry.changed.set()


async def delete(store: ResponseStore, response_id: str) -> bytes:
    """``DELETE /v1/responses/{id}`` (OpenAI's; vLLM has none): forgets the response
    (a background run is cancelled)."""
    entry = store.found(response_id)
    store.delete(response_id)
    await _stop(entry)
    return _encode({"id": response_id, "object": "response.deleted", "deleted": True})


def input_items(store: ResponseStore, response_id: str, scope: Scope) -> bytes:
    """``GET /v1/responses/{id}/input_items`` (OpenAI's; vLLM has none): the request's
    input items, newest first unless ``order=asc``, ``limit`` (1 to 100, default 20) after
    the item ``after``."""
    query = _query(scope, "input_items")
    limit = _int(query, "limit", 1, 100) or 20
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise bad_request("invalid value for 'order': expected asc or desc", "order")
    entry = store.found(response_id)
    items = entry.items if order == "asc" else entry.items[::-1]
    after = query.get("after")
    if after is not None:
        ids = [item.get("id") for item in items]
        if after not in ids:
            raise bad_request(f"no input item '{after}' in this response", "after")
        items = items[ids.index(after) + 1:]
    page = items[:limit]
    return _encode({"object": "list", "data": page,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                    "has_more": len(items) > limit})


async def stored(store: ResponseStore, scope: Scope, receive: Receive, send: Send,
                 methods: Callable[[str], tuple[str, ...] | None]) -> None:
    """The stored-response paths: 404 for another path, 405 for another method."""
    path: str = scope["path"]
    parts = path.removeprefix("/v1/responses/").split("/")
    allowed = methods(path)
    if allowed is None:
        raise APIError(ErrorKind.NOT_FOUND, f"Not Found: {path}")
    names = allowed_methods(allowed)
    method = scope["method"]
    if method not in names:
        raise APIError(ErrorKind.METHOD_NOT_ALLOWED, f"Method Not Allowed: {method} {path}",
                       headers=[(b"allow", ",".join(names).encode())])
    response_id = parts[0]
    if len(parts) == 1 and method in ("GET", "HEAD"):
        await retrieve(store, response_id, scope, send)
        return
    body: bytes
    if len(parts) == 1:
        body = await delete(store, response_id)
    elif parts[1] == "cancel":
        body = await cancel(store, response_id)
    else:
        body = input_items(store, response_id, scope)
    await send_json(send, 200, body)


class Sink:
    """The ASGI ends of a background run: no body, no disconnect; what it sends goes to
    the entry (its stream's events, or a failure's message)."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        self._status = 200
        self._body = b""
        self._buffer = b""
        self._read = False

    async def receive(self) -> dict[str, Any]:
        if not self._read:
            self._read = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # never: a background run has no client
        raise AssertionError("unreachable")

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
            return
        chunk: bytes = message.get("body", b"")
        if self._status != 200:
            self._body += chunk
            return
        self._buffer += chunk
        while b"\n\n" in self._buffer:
            event, self._buffer = self._buffer.split(b"\n\n", 1)
            if event.startswith(b"event: "):  # not a keep-alive comment
                self.entry.add_event(event + b"\n\n")
                if event.startswith(b"event: error\n"):
                    self._body = event.split(b"data: ", 1)[-1]

    def error(self) -> str:
        """The failure's message, from the error body or event."""
        try:
            data = msgspec.json.decode(self._body) if self._body else {}
        except msgspec.DecodeError:
            data = {}
        if isinstance(data, dict):
            inner = data.get("error", data)
            message = inner.get("message") if isinstance(inner, dict) else None
            if isinstance(message, str):
                return message
        return "the background response ended without a result"


async def run_background(entry: Entry, run: Callable[[Receive, Send], Awaitable[None]]) -> None:
    """A background run: ``in_progress``, then the generation ``run`` serves into a
    :class:`Sink`; a run that ends without its response is ``failed``."""
    if entry.response.get("status") == "queued":
        entry.response["status"] = "in_progress"
    sink = Sink(entry)
    message = None
    try:
        await run(sink.receive, sink.send)
    except APIError as error:
        message = error.message
    finally:
        failed(entry, message or sink.error())
