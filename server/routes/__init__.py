"""The route tables, in one place: the serving API (:class:`App`, a plain ASGI application
served by uvicorn) and the engine-less render service (:class:`RenderApp`), and the
:func:`guard` every request passes (API key, admission, body limit, 404 / 405). Each
endpoint is a module below. Rust: rust/server/src/routes.rs. Behaviour: docs/api.md,
"Routes".
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Awaitable
from typing import Any

from server.edge import Handler, Receive, Scope, Send, allowed_methods
from server.edge.auth import authorized, protected
from server.edge.body import ClientGone
from server.edge.error import APIError, Dialect, ErrorKind, send_error
from server.edge.metrics import Metrics
from server.routes import (
    chat_batch,
    chat_completions,
    completions,
    health,
    invocations,
    messages,
    metrics,
    models,
    render,
    responses,
    tokenize,
)
from server.routes.pooling import classify, embeddings, score
from server.routes.pooling import pooling as pool
from server.routes.responses.store import ResponseStore
from server.state import RenderState, State

logger = logging.getLogger("vrs.frontend")

__all__ = ["App", "RenderApp", "guard", "render_router", "router"]

Routes = dict[str, tuple[str | tuple[str, ...], Handler]]


def router(state: State) -> Routes:
    """The serving API's routes (``/tokenizer_info`` with
    --enable-tokenizer-info-endpoint only, as in vLLM)."""

    def on(handler: Any) -> Handler:
        return functools.partial(handler, state)

    store = ResponseStore(state.options.enable_responses_store,
                          state.options.responses_store_max_entries)
    routes: Routes = {
        "/v1/chat/completions": ("POST", on(chat_completions.chat_completions)),
        "/v1/chat/completions/batch": ("POST", on(chat_batch.chat_batch)),
        "/v1/completions": ("POST", on(completions.completions)),
        "/v1/models": ("GET", on(models.models)),
        "/health": ("GET", on(health.health)),
        "/metrics": ("GET", on(metrics.metrics)),
        "/load": ("GET", on(health.load)),
        "/version": ("GET", health.version),
        "/ping": (("GET", "POST"), on(health.health)),
        "/invocations": ("POST", on(invocations.invocations)),
        "/tokenize": ("POST", on(tokenize.tokenize)),
        "/detokenize": ("POST", on(tokenize.detokenize)),
        "/v1/responses": ("POST", functools.partial(responses.create, state, store)),
        responses.PREFIX: (("GET", "POST", "DELETE"),
                           functools.partial(responses.stored_routes, store)),
        "/v1/messages": ("POST", on(messages.messages)),
        "/v1/messages/count_tokens": ("POST", on(messages.count_tokens)),
        "/v1/embeddings": ("POST", on(embeddings.embeddings)),
        "/pooling": ("POST", on(pool.pooling)),
        "/classify": ("POST", on(classify.classify)),
        "/score": ("POST", on(score.score)),
        "/v1/score": ("POST", on(score.score)),
        "/rerank": ("POST", on(score.rerank)),
        "/v1/rerank": ("POST", on(score.rerank)),
        "/v2/rerank": ("POST", on(score.rerank)),
    }
    if state.tokenizer_info is not None:
        routes["/tokenizer_info"] = ("GET", on(tokenize.tokenizer_info))
    return routes


def render_router(state: RenderState) -> Routes:
    """The render service's routes."""

    def on(handler: Any) -> Handler:
        return functools.partial(handler, state)

    return {
        "/v1/chat/completions/render": ("POST", on(render.chat)),
        "/v1/completions/render": ("POST", on(render.completion)),
        "/v1/responses/render": ("POST", on(render.responses)),
        "/v1/messages/render": ("POST", on(render.messages)),
        "/v1/models": ("GET", on(models.render_models)),
        "/health": ("GET", health.render_health),
    }


class App:
    """The serving API's ASGI callable; ``state.client`` must be started before requests
    arrive."""

    def __init__(self, state: State) -> None:
        self.state = state
        self._routes = router(state)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        traces = self.state.traces
        if traces is not None and scope["type"] == "http":
            await traces.handle(scope, receive, send, self._dispatch)
        else:
            await self._dispatch(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        await guard(self._routes, scope, receive, send, self.state.api_key,
                    self.state.metrics)


class RenderApp:
    """The ASGI callable of the render service."""

    def __init__(self, state: RenderState) -> None:
        self.state = state
        self._routes = render_router(state)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await guard(self._routes, scope, receive, send)


def find_route(routes: Routes, path: str) -> tuple[str | tuple[str, ...], Handler] | None:
    """The route at ``path``: its exact entry, else the entry of the longest key ending in
    ``/`` that ``path`` extends (``/v1/responses/`` serves ``/v1/responses/{id}...``)."""
    route = routes.get(path)
    if route is not None:
        return route
    best = ""
    for key in routes:
        if key.endswith("/") and path.startswith(key) and len(path) > len(key) \
                and len(key) > len(best):
            best = key
    return routes[best] if best else None


async def guard(routes: Routes, scope: Scope,
                   receive: Receive,
                   send: Send, api_key: bytes | None = None,
                   metrics: Metrics | None = None) -> None:
    """Routes one ASGI request: 401 without the API key on /v1/*, JSON 404 / 405,
    APIError bodies (in the path's dialect), 500 for our own bugs; counts it in
    ``metrics``."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    status = [0]
    if metrics is not None:
        inner = send

        def send(message: dict[str, Any]) -> Awaitable[None]:
            # Not a coroutine of its own: a streamed token's body goes straight to the
            # server's send, with no extra frame per message.
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            return inner(message)

    route = find_route(routes, path)
    dialect = Dialect.for_path(path)
    try:
        if api_key is not None and protected(path) and not authorized(scope, api_key):
            raise APIError(ErrorKind.UNAUTHORIZED, "invalid or missing API key: send "
                           "`Authorization: Bearer <key>` or `x-api-key: <key>`",
                           headers=[(b"www-authenticate", b"Bearer")])
        if route is None:
            raise APIError(ErrorKind.NOT_FOUND, f"Not Found: {path}")
        method, handler = route
        methods = allowed_methods(method)
        if scope["method"] not in methods:
            await send_error(send, APIError(ErrorKind.METHOD_NOT_ALLOWED,
                                            f"Method Not Allowed: {scope['method']} {path}"),
                             [(b"allow", ",".join(methods).encode())], dialect)
            return
        await handler(scope, receive, send)
    except APIError as error:
        await send_error(send, error, dialect=dialect)
    except ClientGone:
        return
    except Exception:  # our bug: a 500 with the error body, if the response has not begun
        logger.exception("internal error on %s %s", scope["method"], path)
        with contextlib.suppress(Exception):
            await send_error(send, APIError(ErrorKind.INTERNAL, "internal server error"),
                             dialect=dialect)
    finally:
        if metrics is not None and status[0]:
            metrics.request(path, status[0])
