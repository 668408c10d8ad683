"""``POST /v1/responses`` (stateless): the body translated into a chat request
(:mod:`server.responses.request`), the chat choice's deltas shaped as output items and
typed events (:mod:`server.responses.events`). The routes of stored responses
(``GET``/``DELETE /v1/responses/{id}``, ``POST …/{id}/cancel``, ``GET …/{id}/input_items``)
answer 404: nothing is stored."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from server.error import APIError, ErrorKind

Handler = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PREFIX = "/v1/responses/"


def takes_effort(template_source: str | None) -> bool:
    """Whether the chat template reads ``reasoning_effort`` (``reasoning.effort``)."""
    return template_source is not None and "reasoning_effort" in template_source


def not_stored(response_id: str) -> APIError:
    return APIError(ErrorKind.NOT_FOUND, f"Response '{response_id}' not found: this server "
                    "is stateless (store is not supported)")


def stored_route(path: str) -> tuple[str, Handler] | None:
    """The route of a stored response's path (a 404 handler), or None for other paths."""
    if not path.startswith(PREFIX):
        return None
    parts = path[len(PREFIX):].split("/")
    if not parts[0] or len(parts) > 2:
        return None
    methods: str | tuple[str, ...] = ("GET", "DELETE")
    if len(parts) == 2:
        if parts[1] == "cancel":
            methods = "POST"
        elif parts[1] == "input_items":
            methods = "GET"
        else:
            return None

    async def missing(scope: dict[str, Any], receive: Any, send: Any) -> None:
        raise not_stored(parts[0])

    return methods, missing
