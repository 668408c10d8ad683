"""``POST /v1/responses``: the body translated into a chat request
(:mod:`server.routes.responses.request`), the chat choice's deltas shaped as output items and
typed events (:mod:`server.routes.responses.events`); with ``--enable-responses-store`` the
responses kept (:mod:`server.routes.responses.store`) and the stored-response routes and
background runs (:mod:`server.routes.responses.stored`).
Rust: rust/server/src/routes/responses.rs. Behaviour: docs/api.md, "Responses API".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import msgspec

from server.dispatch import generate
from server.edge import Receive, Scope, Send, send_json
from server.edge import request_id as request_ids
from server.edge.error import APIError
from server.output.choice import ChatChoice
from server.parsers.reasoning import markers_of
from server.routes.responses.events import ResponseShapes
from server.routes.responses.request import Echo, Translated, responses_param, translate
from server.routes.responses.store import (
    Entry,
    ResponseStore,
    Stateful,
    check,
    continued,
    input_items,
    known_calls,
    stateful,
)
from server.routes.responses.stored import events_of, run_background, send_events, stored
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


async def create(state: State, store: ResponseStore, scope: Scope, receive: Receive,
                 send: Send) -> None:
    """``POST /v1/responses``: the chat generate path with the Responses shapes; with the
    store, kept (``store``), continued (``previous_response_id``) or run in the
    background (``background``: answered at once, ``queued``)."""
    echo: list[Echo] = []
    asked: list[Stateful] = []
    kept: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = []  # messages, items

    async def build(body: bytes) -> list[Prompt]:
        request = stateful(body, store)
        translated = translate(body, known_calls(request.previous))
        check(request, store)
        chat = translated.chat
        chat["messages"] = continued(chat["messages"], translated.echo.instructions is not None,
                                     request.previous)
        echo.append(translated.echo)
        asked.append(request)
        prompts = [await chat_prompt(state.prompts, translated)]
        if request.keep:
            raw_input = msgspec.json.decode(body).get("input")
            kept.append((chat["messages"], input_items(raw_input)))
        if request.background:
            raise _Background(prompts, translated.stream)
        return prompts

    def shapes_of(prompts: list[Prompt], rid: str) -> ResponseShapes:
        prompt = prompts[0]
        assert prompt.chat is not None
        choice = ChatChoice(0, prompt.chat, markers_of(state.options.reasoning_parser),
                            prompt.settings.sampling.logprobs, state.token_texts)
        shapes = ResponseShapes(rid.removeprefix(f"{ID_PREFIX}-"), int(time.time()),
                                state.model_name, choice, (prompt.text, prompt.ids), echo[0])
        request = asked[0]
        shapes.previous_response_id = request.previous_id
        shapes.store = request.keep
        if request.keep:
            messages, items = kept[0]

            def keep(final: dict[str, Any]) -> None:
                store.put(shapes.rid, Entry(final, messages, items))
            shapes.keep = keep
        return shapes

    try:
        await generate(state, receive, send, build, shapes_of, ID_PREFIX)
    except _Background as queued:
        await _start_background(state, store, queued, shapes_of, kept[0], send)


class _Background(Exception):
    """A background request past its checks: answered at once, then run on its own."""

    def __init__(self, prompts: list[Prompt], stream: bool) -> None:
        self.prompts = prompts
        self.stream = stream


async def _start_background(state: State, store: ResponseStore, queued: _Background,
                            shapes_of: Callable[[list[Prompt], str], ResponseShapes],
                            kept: tuple[list[dict[str, Any]], list[dict[str, Any]]],
                            send: Send) -> None:
    """Keeps the ``queued`` response, starts its run, answers it (or, streamed, the run's
    events as they come)."""
    rid, _ = request_ids.engine_id(ID_PREFIX)
    shapes = shapes_of(queued.prompts, rid)
    entry = Entry(shapes.response("queued", None), *kept)
    entry.events = [] if queued.stream else None

    def keep(final: dict[str, Any]) -> None:
        if entry.response.get("status") != "cancelled":
            entry.response = final
        entry.changed.set()
    shapes.keep = keep
    store.put(shapes.rid, entry)

    async def prompts(_: bytes) -> list[Prompt]:
        return queued.prompts

    async def run(receive: Receive, sink: Send) -> None:
        await generate(state, receive, sink, prompts, lambda _p, _r: shapes, ID_PREFIX)

    entry.task = asyncio.create_task(run_background(entry, run))
    if queued.stream:
        await send_events(send, events_of(entry, None))
    else:
        await send_json(send, 200, _encode(entry.response))


def stored_methods(path: str) -> tuple[str, ...] | None:
    """The methods of a stored-response path (None: no such route)."""
    parts = path.removeprefix(PREFIX).split("/")
    if not parts[0] or len(parts) > 2:
        return None
    if len(parts) == 1:
        return ("GET", "DELETE")
    return {"cancel": ("POST",), "input_items": ("GET",)}.get(parts[1])


async def stored_routes(store: ResponseStore, scope: Scope, receive: Receive,
                        send: Send) -> None:
    """The stored-response routes (:mod:`server.routes.responses.stored`)."""
    await stored(store, scope, receive, send, stored_methods)
