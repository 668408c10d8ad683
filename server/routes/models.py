"""``GET /v1/models``: the one served model (serving and render service alike).
Rust: rust/server/src/routes/models.rs."""

from __future__ import annotations

import msgspec

from server import openai as s
from server.edge import Receive, Scope, Send, send_json
from server.state import RenderState, State

_encode = msgspec.json.Encoder().encode


def model_list(name: str, created: int, root: str, max_model_len: int) -> bytes:
    """The ``GET /v1/models`` body: the one served model."""
    card = s.ModelCard(id=name, created=created, root=root, max_model_len=max_model_len)
    return _encode(s.ModelList(data=[card]))


async def models(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await send_json(send, 200, model_list(state.model_name, state.created, state.model_root,
                                          state.client.max_model_len))


async def render_models(state: RenderState, scope: Scope, receive: Receive,
                        send: Send) -> None:
    await send_json(send, 200, model_list(state.model_name, state.created, state.model_root,
                                          state.limits.max_model_len))
