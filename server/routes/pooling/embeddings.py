"""``POST /v1/embeddings`` (vLLM 0.33's shape, OpenAI's SDK's): each input's embedding, as
floats or as base64 (the float32 little-endian bytes the OpenAI SDK decodes; vLLM's
``embed_dtype`` and ``endianness`` change them), with ``dimensions`` (a Matryoshka model's
truncation, refused by the engine otherwise) and ``use_activation`` (False: not
normalized). Response ``{id: "embd-…", object: "list", created, model, data: [{index,
object: "embedding", embedding}], usage}``. Rust: rust/server/src/routes/pooling/embeddings.rs.
Behaviour: docs/api.md, "Pooling routes".
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable

import msgspec
import numpy as np

from engine import protocol as p
from server.edge import Receive, Scope, Send
from server.edge.error import bad_request
from server.routes.pooling.dispatch import Batch, Pooled, pool
from server.routes.pooling.request import (
    COMMON,
    ENCODING,
    INPUT,
    PoolingRequest,
    check_encoding,
    check_task,
    parse,
    prompts,
)
from server.state import State

ID_PREFIX = "embd"  # the response id: embd-<32 hex>
KEYS = COMMON | INPUT | ENCODING


class Usage(msgspec.Struct):
    """vLLM's UsageInfo of a pooling response: prompt tokens only."""

    prompt_tokens: int
    total_tokens: int
    completion_tokens: int = 0
    prompt_tokens_details: None = None
    completion_tokens_details: None = None

    @classmethod
    def of(cls, prompt_tokens: int) -> Usage:
        return cls(prompt_tokens, prompt_tokens)


class EmbeddingData(msgspec.Struct, kw_only=True):
    index: int
    object: str = "embedding"
    embedding: list[float] | str


class EmbeddingResponse(msgspec.Struct, kw_only=True):
    id: str
    object: str = "list"
    created: int
    model: str
    data: list[EmbeddingData]
    usage: Usage


_encode = msgspec.json.Encoder().encode


def encoded(vector: list[float], dtype: str | None) -> list[float] | str:
    """``vector`` as floats (``dtype`` None), or base64 of its values as numpy ``dtype``
    (e.g. ``<f4``, float32 little-endian: what the OpenAI SDK decodes)."""
    if dtype is None:
        return vector
    return base64.b64encode(np.asarray(vector, dtype=dtype).tobytes()).decode("ascii")


def encoding_of(request: PoolingRequest) -> str | None:
    """The numpy dtype of a base64 answer; None for floats."""
    dtype = check_encoding(request)
    return None if request.encoding_format == "float" else dtype


def embed_params(request: PoolingRequest) -> p.PoolingParams:
    dims = request.dimensions
    if dims is not None and dims < 1:
        raise bad_request(f"`dimensions` must be at least 1, got {dims}", "dimensions")
    return p.PoolingParams(p.PoolingTask.EMBED.value, dimensions=dims,
                           normalize=None if request.use_activation is None
                           else request.use_activation)


async def _prepare(state: State, body: bytes) -> tuple[Batch, Callable[[Pooled], bytes]]:
    request = parse(state, body, KEYS)
    check_task(state, p.PoolingTask.EMBED.value)
    dtype = encoding_of(request)
    params = embed_params(request)
    ids = await prompts(state, request)

    def respond(pooled: Pooled) -> bytes:
        data = [EmbeddingData(index=i, embedding=encoded(v, dtype))
                for i, v in enumerate(pooled.outputs)]
        return _encode(EmbeddingResponse(
            id=pooled.request_id, created=pooled.created, model=state.model_name, data=data,
            usage=Usage.of(pooled.prompt_tokens)))

    return Batch(ids, [params] * len(ids), request.priority, request.cache_salt), respond


async def embeddings(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await pool(state, receive, send, ID_PREFIX, functools.partial(_prepare, state))
