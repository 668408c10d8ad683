"""``POST /classify`` (vLLM 0.33's shape): each input's class probabilities (the raw logits
with ``use_activation`` false) and its most likely class's label. Response ``{id:
"classify-…", object: "list", created, model, data: [{index, label, probs, num_classes}],
usage}``. Rust: rust/server/src/routes/pooling/classify.rs. Behaviour: docs/api.md,
"Pooling routes".
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import msgspec

from engine import protocol as p
from server.edge import Receive, Scope, Send
from server.routes.pooling.dispatch import Batch, Pooled, pool
from server.routes.pooling.embeddings import Usage
from server.routes.pooling.request import COMMON, INPUT, check_task, parse, prompts
from server.state import State

ID_PREFIX = "classify"  # the response id: classify-<32 hex>
KEYS = COMMON | INPUT


class ClassificationData(msgspec.Struct):
    index: int
    label: str | None
    probs: list[float]
    num_classes: int


class ClassificationResponse(msgspec.Struct, kw_only=True):
    id: str
    object: str = "list"
    created: int
    model: str
    data: list[ClassificationData]
    usage: Usage


_encode = msgspec.json.Encoder().encode


def label(labels: tuple[str, ...], scores: list[float]) -> str | None:
    """The label of the highest score (``LABEL_<i>`` past the model's labels)."""
    if not scores:
        return None
    best = max(range(len(scores)), key=scores.__getitem__)
    return labels[best] if best < len(labels) else f"LABEL_{best}"


async def _prepare(state: State, body: bytes) -> tuple[Batch, Callable[[Pooled], bytes]]:
    request = parse(state, body, KEYS)
    check_task(state, p.PoolingTask.CLASSIFY.value)
    params = p.PoolingParams(p.PoolingTask.CLASSIFY.value,
                             use_activation=request.use_activation)
    ids = await prompts(state, request)
    labels = state.client.classify_labels

    def respond(pooled: Pooled) -> bytes:
        data = [ClassificationData(i, label(labels, v), v, len(v))
                for i, v in enumerate(pooled.outputs)]
        return _encode(ClassificationResponse(
            id=pooled.request_id, created=pooled.created, model=state.model_name, data=data,
            usage=Usage.of(pooled.prompt_tokens)))

    return Batch(ids, [params] * len(ids), request.priority, request.cache_salt), respond


async def classify(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await pool(state, receive, send, ID_PREFIX, functools.partial(_prepare, state))
