"""``POST /invocations``, vLLM's SageMaker entry point: the body decides the endpoint
(``messages``: chat, else ``prompt``: completions), which then runs exactly as on its own
path. On a pooling model (:func:`pooling_route`): ``query`` → rerank; ``queries``,
``data_1`` or ``text_1`` → score; ``input`` or ``messages`` → embeddings (or classify, on a
classifier). Rust: rust/server/src/routes/invocations.rs. Behaviour: docs/api.md, "Routes".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from engine import protocol as p
from server.dispatch import generate
from server.edge import Receive, Scope, Send
from server.edge.error import bad_request
from server.output import response
from server.routes import chat_completions, completions
from server.routes.pooling import classify, embeddings, score
from server.state import State
from server.validate import params
from server.validate.prompt import Prompt

NO_HANDLER = ("Cannot find suitable handler for request. Expected one of: a chat completion "
              "request (with `messages`), a completion request (with `prompt`)")

NO_POOLING_HANDLER = ("Cannot find suitable handler for request. Expected one of: a rerank "
                      "request (with `query`), a score request (with `queries`, `data_1` or "
                      "`text_1`), an embedding or classification request (with `input` or "
                      "`messages`)")
SCORE_KEYS = ("queries", "data_1", "text_1")
PoolingRoute = Callable[[State, Scope, Receive, Send], Awaitable[None]]

_probe = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode  # top-level keys; values unbuilt


def given_keys(body: bytes) -> frozenset[str]:
    """The body's top-level keys whose values are not null; a body that is not a JSON
    object gets the endpoints' own 400."""
    try:
        keys = _probe(body)
    except (msgspec.DecodeError, UnicodeDecodeError):
        params.decode(body, chat=True)  # raises the endpoints' error for this body
        raise bad_request("the request body must be a JSON object") from None
    return frozenset(k for k, raw in keys.items() if bytes(raw) != b"null")


def pooling_route(tasks: tuple[str, ...], body: bytes) -> PoolingRoute:
    """The pooling route an ``/invocations`` body is for (vLLM's order: rerank, score,
    then the model's embed or classify task), else a 400."""
    keys = given_keys(body)
    if "query" in keys:
        return score.rerank
    if any(key in keys for key in SCORE_KEYS):
        return score.score
    if "input" in keys or "messages" in keys:
        return embeddings.embeddings if p.PoolingTask.EMBED.value in tasks \
            else classify.classify
    raise bad_request(NO_POOLING_HANDLER)


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with ``body`` (read already) given back first."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return again


def is_chat(body: bytes) -> bool:
    """True for a chat body (``messages`` not null), False for a completion (``prompt`` not
    null), else a 400; a body that is not a JSON object gets the endpoints' own 400."""
    keys = given_keys(body)
    if "messages" in keys:
        return True
    if "prompt" in keys:
        return False
    raise bad_request(NO_HANDLER)


async def invocations(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    """A chat or a completions request, as the body decides (on a pooling model, one of
    the pooling routes)."""
    if state.client.runner == p.Runner.POOLING.value:
        body = await state.body(receive)
        route = pooling_route(state.client.pooling_tasks, body)
        await route(state, scope, _replay(body, receive), send)
        return
    kind: list[bool | None] = [None]

    async def build(body: bytes) -> list[Prompt]:
        if kind[0] is None:
            kind[0] = is_chat(body)
        if kind[0]:
            return await chat_completions.build(state, body)
        return await completions.build(state, body)

    def shapes_of(prompts: list[Prompt], rid: str) -> response.Shapes:
        if kind[0]:
            return chat_completions.shapes(state, prompts, rid)
        return completions.shapes(state, prompts, rid)

    await generate(state, receive, send, build, shapes_of,
                   lambda: chat_completions.ID_PREFIX if kind[0] else completions.ID_PREFIX)
