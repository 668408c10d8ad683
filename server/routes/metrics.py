"""``GET /metrics``: the Prometheus text of :mod:`server.edge.metrics`, with the engines'
latest stats and the requests routed to each, then the ``vllm:*`` series of
:mod:`server.edge.vllm_metrics`. Rust: rust/server/src/routes/metrics.rs."""

from __future__ import annotations

from server.edge import Receive, Scope, Send
from server.edge.metrics import CONTENT_TYPE
from server.state import State


async def metrics(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    client = state.client
    stats = client.engine_stats()
    vllm: list[str] = []
    state.metrics.vllm.render(vllm, state.model_name, client.max_model_len, stats)
    body = state.metrics.render(stats, state.admission.active, client.routed) \
        + "".join(vllm).encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", CONTENT_TYPE),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
