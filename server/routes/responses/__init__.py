"""``POST /v1/responses`` (stateless): the body translated into a chat request
(:mod:`server.routes.responses.request`), the chat choice's deltas shaped as output items and
typed events (:mod:`server.routes.responses.events`); the stored-response routes answer 404.
Rust: rust/server/src/routes/responses.rs. Behaviour: docs/api.md, "Responses API".
"""

from __future__ import annotations

import time

import msgspec

from server.dispatch import generate
from server.edge import Receive, Scope, Send, allowed_methods
from server.edge.error import APIError, ErrorKind
from server.output.choice import ChatChoice
from server.parsers.reasoning import markers_of
from server.routes.responses.events import ResponseShapes
from server.routes.responses.request import Echo, Translated, responses_param, translate
from server.state import State
from server.validate.prompt import Prompt, PromptBuilder

PREFIX = "/v1/responses/"  # the prefix route of the stored-response paths
ID_PREFIX = "resp"  # the engine request ids: resp-<32 hex>; the response id: resp_<hex>
_encode = msgspec.json.Encoder().encode


async def chat_prompt(prompts: PromptBuilder, translated: Translated) -> Prompt:
    """The translated request through the chat prompt builder; its errors name the
    Responses fields (``responses_param``), and so does the 400 of an engine that refuses
    its structured-output spec (the constraint's name)."""
    try:
        prompt = await prompts.chat(_encode(translated.chat))
    except APIError as error:
        error.param = responses_param(error.param)
        raise
    prompt.settings.constraint = responses_param(prompt.settings.constraint)
    return prompt


async def create(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    """``POST /v1/responses``: the chat generate path with the Responses shapes."""
    echo: list[Echo] = []

    async def build(body: bytes) -> list[Prompt]:
        translated = translate(body)
        echo.append(translated.echo)
        return [await chat_prompt(state.prompts, translated)]

    def shapes_of(prompts: list[Prompt], rid: str) -> ResponseShapes:
        prompt = prompts[0]
        assert prompt.chat is not None
        choice = ChatChoice(0, prompt.chat, markers_of(state.options.reasoning_parser), None,
                            state.token_texts)
        return ResponseShapes(rid.removeprefix(f"{ID_PREFIX}-"), int(time.time()),
                              state.model_name, choice, len(prompt.ids), echo[0])

    await generate(state, receive, send, build, shapes_of, ID_PREFIX)


def stored_methods(path: str) -> tuple[str, ...] | None:
    """The methods of a stored-response path (None: no such route)."""
    parts = path.removeprefix(PREFIX).split("/")
    if not parts[0] or len(parts) > 2:
        return None
    if len(parts) == 1:
        return ("GET", "DELETE")
    return {"cancel": ("POST",), "input_items": ("GET",)}.get(parts[1])


async def stored(scope: Scope, receive: Receive, send: Send) -> None:
    """The stored-response routes: 404, nothing is stored (405 for another method, 404
    for another path)."""
    path = scope["path"]
    methods = stored_methods(path)
    if methods is None:
        raise APIError(ErrorKind.NOT_FOUND, f"Not Found: {path}")
    allowed = allowed_methods(methods)
    if scope["method"] not in allowed:
        raise APIError(ErrorKind.METHOD_NOT_ALLOWED,
                       f"Method Not Allowed: {scope['method']} {path}",
                       headers=[(b"allow", ",".join(allowed).encode())])
    response_id = path.removeprefix(PREFIX).split("/")[0]
    raise APIError(ErrorKind.NOT_FOUND, f"Response '{response_id}' not found: this server "
                   "is stateless (store is not supported)")
