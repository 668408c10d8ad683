"""``GET /health`` and vLLM's SageMaker ``GET|POST /ping`` (200, or 503 once the engine is
gone), ``GET /load`` (generation requests in flight, and each engine's tensor-parallel
ranks' memory from its READY) and ``GET /version``; the render service's ``GET /health``.
Rust: rust/server/src/routes/health.rs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from engine import protocol as p
from engine.version import __version__
from server.edge import Receive, Scope, Send, send_json
from server.edge.error import engine_dead
from server.state import State

_encode = msgspec.json.Encoder().encode


async def _empty_200(send: Send) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


async def health(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    if state.client.dead_reason is not None:
        raise engine_dead(state.client.dead_reason)
    await _empty_200(send)


async def render_health(scope: Scope, receive: Receive, send: Send) -> None:
    await _empty_200(send)


def load_body(server_load: int, readies: Iterable[p.Ready]) -> dict[str, Any]:
    """``/load``'s body: vLLM's ``server_load``, and each engine's ranks (by engine index,
    each rank's fields as READY gives them; an engine that reports none: ``[]``)."""
    engines = [{"engine_index": ready.engine_index,
                "ranks": [msgspec.structs.asdict(rank) for rank in ready.ranks]}
               for ready in sorted(readies, key=lambda ready: ready.engine_index)]
    return {"server_load": server_load, "engines": engines}


async def load(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    body = load_body(state.admission.active, state.client.readies.values())
    await send_json(send, 200, _encode(body))


async def version(scope: Scope, receive: Receive, send: Send) -> None:
    await send_json(send, 200, _encode({"version": __version__}))
