"""Server-sent events framing: ``data: {json}\\n\\n`` ... ``data: [DONE]\\n\\n`` (chat,
completions), or typed events ``event: TYPE\\ndata: {json}\\n\\n`` (Responses, Anthropic
Messages); and the ``: keep-alive`` comment (:func:`keep_alive`).
Rust: rust/server/src/output/sse.rs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar

import msgspec

_encode = msgspec.json.Encoder().encode
T = TypeVar("T")
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
DONE = b"data: [DONE]\n\n"
KEEP_ALIVE = b": keep-alive\n\n"


def event(value: msgspec.Struct) -> bytes:
    return b"data: " + _encode(value) + b"\n\n"


def typed_event(kind: str, value: Any) -> bytes:
    """A typed event (Responses, Anthropic Messages): ``event: kind`` and ``value`` as
    its JSON data."""
    return b"event: " + kind.encode() + b"\ndata: " + _encode(value) + b"\n\n"


async def keep_alive(items: AsyncIterator[T], every: float | None) -> AsyncIterator[T | None]:
    """``items``, with a None whenever none came for ``every`` seconds (None: never)."""
    if every is None:
        async for item in items:
            yield item
        return
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(items))
            done, _ = await asyncio.wait((pending,), timeout=every)
            if not done:
                yield None  # the step goes on; the next wait resumes it
                continue
            step, pending = pending, None
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
