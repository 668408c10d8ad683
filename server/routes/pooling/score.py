"""``POST /score`` (also ``/v1/score``) and ``POST /rerank`` (also ``/v1/rerank``,
``/v2/rerank``; Jina's and Cohere's shape), vLLM 0.33's: relevance scores of text pairs.
``/score`` takes its two sides under any of vLLM's names (``queries`` / ``documents``,
``queries`` / ``items``, ``data_1`` / ``data_2``, ``text_1`` / ``text_2``), each a string
or a list of strings, paired 1:1, 1:N or N:N; ``/rerank`` a ``query`` and its
``documents``, answered best first (``top_n``: the first n; ``return_documents``: false
leaves each result's document out).

On a model that serves the ``score`` task (a cross-encoder) each pair is tokenized
together, as transformers' ``tokenizer(text, text_pair)`` does, and sent with
``token_type_start`` (where the second text's tokens begin); on an embedding model
(``embed`` without ``score``) every text is embedded and a pair's score is the cosine
similarity of its two embeddings. Rust: rust/server/src/routes/pooling/score.rs.
Behaviour: docs/api.md, "Pooling routes".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from engine import protocol as p
from server.edge import Receive, Scope, Send
from server.edge.error import bad_request
from server.routes.pooling.dispatch import Batch, Pooled, pool
from server.routes.pooling.embeddings import Usage
from server.routes.pooling.request import (
    SCORING,
    PoolingRequest,
    check_length,
    check_task,
    parse,
    truncated,
    truncates_left,
)
from server.state import State

ID_PREFIX = "score"  # the response id of both routes, as vLLM's: score-<32 hex>
# /score's sides, under each of vLLM's pairs of names (the first pair given is used).
SIDES = (("queries", "documents"), ("queries", "items"), ("data_1", "data_2"),
         ("text_1", "text_2"))
SCORE_KEYS = SCORING | {name for pair in SIDES for name in pair}
RERANK_KEYS = SCORING | {"query", "documents", "top_n", "return_documents"}


class ScoreData(msgspec.Struct, kw_only=True):
    index: int
    object: str = "score"
    score: float


class ScoreResponse(msgspec.Struct, kw_only=True):
    id: str
    object: str = "list"
    created: int
    model: str
    data: list[ScoreData]
    usage: Usage


class RerankDocument(msgspec.Struct):
    """vLLM's ``RerankDocument``: the text, and ``multi_modal`` (always null here)."""

    text: str
    multi_modal: None = None


class RerankResult(msgspec.Struct, kw_only=True):
    index: int
    document: RerankDocument | UnsetType = UNSET  # left out with return_documents false
    relevance_score: float


class RerankUsage(msgspec.Struct):
    prompt_tokens: int
    total_tokens: int


class RerankResponse(msgspec.Struct):
    id: str
    model: str
    usage: RerankUsage
    results: list[RerankResult]


_encode = msgspec.json.Encoder().encode


def _texts(value: Any, name: str) -> list[str]:
    """One side: a string or a non-empty list of strings."""
    if isinstance(value, str):
        return [value]
    if type(value) is list and value and all(isinstance(v, str) for v in value):
        return list(value)
    if type(value) is list and not value:
        raise bad_request(f"At least one text element must be given (`{name}` is empty)",
                          name)
    if isinstance(value, dict) or (type(value) is list and any(isinstance(v, dict)
                                                               for v in value)):
        raise bad_request(f"`{name}`: multi-modal score inputs are not supported; send "
                          "text", name)
    raise bad_request(f"`{name}` must be a string or a list of strings", name)


def _checked(request: PoolingRequest) -> None:
    """The scoring fields this server does not implement: a 400, not an unapplied field."""
    for name in ("max_tokens_per_query", "max_tokens_per_doc"):
        if getattr(request, name):
            raise bad_request(f"`{name}` is not supported by this server; send 0 or leave "
                              "it out", name)
    for name in ("instruction", "chat_template_kwargs"):
        if getattr(request, name) is not None:
            raise bad_request(f"`{name}` is not supported by this server (it applies to "
                              "score templates, which it does not render)", name)


def score_sides(request: PoolingRequest) -> tuple[list[str], list[str]]:
    """/score's two sides, checked to pair 1:1, 1:N or N:N."""
    given = [pair for pair in SIDES
             if getattr(request, pair[0]) is not None or getattr(request, pair[1]) is not None]
    if not given:
        raise bad_request("send the texts to score as `queries` and `documents` (or "
                          "`text_1` and `text_2`)", "queries")
    first, second = given[0]
    for name in given[0]:
        if getattr(request, name) is None:
            raise bad_request(f"`{name}` is required", name)
    left = _texts(getattr(request, first), first)
    right = _texts(getattr(request, second), second)
    if len(left) != 1 and len(left) != len(right):
        raise bad_request("Input lengths must be either 1:1, 1:N or N:N", first)
    return left, right


def _pair_ids(state: State, query: str, document: str) -> tuple[list[int], int | None]:
    """The pair tokenized together, and where the document's tokens begin."""
    encoding = state.text.backend.encode(query, document, add_special_tokens=True)
    start = next((i for i, s in enumerate(encoding.sequence_ids) if s == 1), None)
    return list(encoding.ids), start


def _cut_start(start: int | None, before: int, after: list[int], left: bool) -> int | None:
    """``token_type_start`` after truncation took ``before - len(after)`` tokens away."""
    if start is None:
        return None
    if left:
        start -= before - len(after)
    return start if 0 < start < len(after) else None


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm > 0 else 0.0


async def _scores(state: State, request: PoolingRequest, left: list[str],
                  right: list[str]) -> tuple[Batch, Callable[[list[list[float]]], list[float]]]:
    """The engine requests of the pairs (``left[0]`` with each of ``right`` for 1:N), and
    how their answers become the pairs' scores."""
    tasks = state.client.pooling_tasks
    max_len = state.client.max_model_len
    keep_last = truncates_left(state, request)
    queries = left * len(right) if len(left) == 1 else left
    if p.PoolingTask.SCORE.value in tasks:
        def tokenize() -> list[tuple[list[int], int | None]]:
            return [_pair_ids(state, q, d) for q, d in zip(queries, right, strict=True)]

        pairs = await state.prompts.off_loop(tokenize)
        prompts, params = [], []
        for index, (ids, start) in enumerate(pairs):
            cut = truncated(request, ids, max_len, keep_last)
            check_length(cut, max_len, index, "documents")
            prompts.append(cut)
            params.append(p.PoolingParams(
                p.PoolingTask.SCORE.value, use_activation=request.use_activation,
                token_type_start=_cut_start(start, len(ids), cut, keep_last)))
        return (Batch(prompts, params, request.priority, request.cache_salt),
                lambda outputs: [v[0] for v in outputs])
    if p.PoolingTask.EMBED.value not in tasks:
        check_task(state, p.PoolingTask.SCORE.value)
    texts = left + right
    encoded = await state.prompts.off_loop(
        lambda: [state.text.encode(text, True) for text in texts])
    prompts = []
    for index, ids in enumerate(encoded):
        cut = truncated(request, ids, max_len, keep_last)
        check_length(cut, max_len, index, "documents")
        prompts.append(cut)
    embed = p.PoolingParams(p.PoolingTask.EMBED.value)

    def similarities(outputs: list[list[float]]) -> list[float]:
        firsts, seconds = outputs[:len(left)], outputs[len(left):]
        return [_cosine(firsts[0 if len(left) == 1 else i], second)
                for i, second in enumerate(seconds)]

    return (Batch(prompts, [embed] * len(prompts), request.priority, request.cache_salt),
            similarities)


async def _prepare_score(state: State, body: bytes
                         ) -> tuple[Batch, Callable[[Pooled], bytes]]:
    request = parse(state, body, SCORE_KEYS)
    _checked(request)
    left, right = score_sides(request)
    batch, scores_of = await _scores(state, request, left, right)

    def respond(pooled: Pooled) -> bytes:
        data = [ScoreData(index=i, score=score)
                for i, score in enumerate(scores_of(pooled.outputs))]
        return _encode(ScoreResponse(
            id=pooled.request_id, created=pooled.created, model=state.model_name, data=data,
            usage=Usage.of(pooled.prompt_tokens)))

    return batch, respond


async def _prepare_rerank(state: State, body: bytes
                          ) -> tuple[Batch, Callable[[Pooled], bytes]]:
    request = parse(state, body, RERANK_KEYS)
    _checked(request)
    if request.query is None:
        raise bad_request("`query` is required", "query")
    if not isinstance(request.query, str):
        raise bad_request("`query` must be a string", "query")
    if request.documents is None:
        raise bad_request("`documents` is required", "documents")
    documents = _texts(request.documents, "documents")
    if request.top_n < 0:
        raise bad_request(f"`top_n` must be at least 0, got {request.top_n}", "top_n")
    batch, scores_of = await _scores(state, request, [request.query], documents)
    top_n = request.top_n or len(documents)

    def respond(pooled: Pooled) -> bytes:
        results = [RerankResult(index=i, relevance_score=score,
                                document=RerankDocument(documents[i])
                                if request.return_documents else UNSET)
                   for i, score in enumerate(scores_of(pooled.outputs))]
        results.sort(key=lambda r: r.relevance_score, reverse=True)
        tokens = pooled.prompt_tokens
        return _encode(RerankResponse(pooled.request_id, state.model_name,
                                      RerankUsage(tokens, tokens), results[:top_n]))

    return batch, respond


async def score(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await pool(state, receive, send, ID_PREFIX, functools.partial(_prepare_score, state))


async def rerank(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await pool(state, receive, send, ID_PREFIX, functools.partial(_prepare_rerank, state))
