"""``POST /v1/responses`` (stateless): the body translated into a chat request
(:mod:`server.responses.request`), the chat choice's deltas shaped as output items and
typed events (:mod:`server.responses.events`). The routes of stored responses
(``GET``/``DELETE /v1/responses/{id}``, ``POST …/{id}/cancel``, ``GET …/{id}/input_items``)
answer 404: nothing is stored."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from server.choice import ChatChoice
from server.error import APIError, Dialect, ErrorKind
from server.parsers.reasoning import markers_of
from server.prompt import Prompt
from server.responses.events import ResponseShapes
from server.responses.request import Echo, translate

if TYPE_CHECKING:
    from server.routes import App

Handler = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
PREFIX = "/v1/responses/"
_encode = msgspec.json.Encoder().encode


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


async def create(app: App, scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``POST /v1/responses``: the chat generate path with the Responses shapes."""
    echo: list[Echo] = []
    effort = takes_effort(app.text.chat_template_source)

    async def build(body: bytes) -> list[Prompt]:
        translated = translate(body, effort)
        echo.append(translated.echo)
        return [await app.prompts.chat(_encode(translated.chat))]

    def shapes_of(prompts: list[Prompt], hex_id: str) -> ResponseShapes:
        prompt = prompts[0]
        assert prompt.chat is not None
        choice = ChatChoice(0, prompt.chat, markers_of(app.options.reasoning_parser), None,
                            app.token_texts)
        return ResponseShapes(hex_id, int(time.time()), app.model_name, choice,
                              len(prompt.ids), echo[0])

    await app.generate(receive, send, build, shapes_of, Dialect.OPENAI, "resp")
