"""Request bodies: the size limit (413 naming the option that sets it), and a client
that leaves before its body arrived. Rust: rust/server/src/edge/body.rs."""

from __future__ import annotations

from server.edge import Receive
from server.edge.error import payload_too_large

MAX_BODY_BYTES = 32 * 1024 * 1024


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
