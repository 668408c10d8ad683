"""``POST /pooling`` (vLLM 0.33's generic pooling route): each input's pooling output for
``task`` (default: the model's first task), as floats or base64 like /v1/embeddings.
Response ``{id: "pooling-…", object: "list", created, model, data: [{index, object:
"pooling", data}], usage}``. Rust: rust/server/src/routes/pooling/pooling.rs. Behaviour:
docs/api.md, "Pooling routes".
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import msgspec

from engine import protocol as p
from server.edge import Receive, Scope, Send
from server.edge.error import bad_request
from server.routes.pooling.dispatch import Batch, Pooled, pool
from server.routes.pooling.embeddings import Usage, embed_params, encoded, encoding_of
from server.routes.pooling.request import COMMON, ENCODING, INPUT, check_task, parse, prompts
from server.state import State

ID_PREFIX = "pooling"  # the response id: pooling-<32 hex>
KEYS = COMMON | INPUT | ENCODING | {"task"}


class PoolingData(msgspec.Struct, kw_only=True):
    index: int
    object: str = "pooling"
    data: list[float] | str


class PoolingResponse(msgspec.Struct, kw_only=True):
    id: str
    object: str = "list"
    created: int
    model: str
    data: list[PoolingData]
    usage: Usage


_encode = msgspec.json.Encoder().encode


async def _prepare(state: State, body: bytes) -> tuple[Batch, Callable[[Pooled], bytes]]:
    request = parse(state, body, KEYS)
    task = request.task or state.client.pooling_tasks[0]
    if task not in {t.value for t in p.PoolingTask}:
        raise bad_request(f"`task` must be one of {', '.join(t.value for t in p.PoolingTask)}"
                          f", got `{task}`", "task")
    check_task(state, task, "task")
    dtype = encoding_of(request)
    if task == p.PoolingTask.EMBED.value:
        params = embed_params(request)
    elif request.dimensions is not None:
        raise bad_request("`dimensions` applies to the embed task only", "dimensions")
    else:
        params = p.PoolingParams(task, use_activation=request.use_activation)
    ids = await prompts(state, request)

    def respond(pooled: Pooled) -> bytes:
        data = [PoolingData(index=i, data=encoded(v, dtype))
                for i, v in enumerate(pooled.outputs)]
        return _encode(PoolingResponse(
            id=pooled.request_id, created=pooled.created, model=state.model_name, data=data,
            usage=Usage.of(pooled.prompt_tokens)))

    return Batch(ids, [params] * len(ids), request.priority, request.cache_salt), respond


async def pooling(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await pool(state, receive, send, ID_PREFIX, functools.partial(_prepare, state))
