"""Anthropic's Messages API on the chat pipeline: ``POST /v1/messages`` and ``POST
/v1/messages/count_tokens`` (docs/api.md, "Messages"; as ``rust/server/src/routes/messages.rs``).

The body is translated into the equivalent chat request (:mod:`server.messages.request`)
and built by the chat prompt builder (template, tokenization, tool and reasoning parsers,
stop strings, admission, timeout, abort on disconnect: all chat's); the one chat choice's
deltas become the message's content blocks and events (:mod:`server.messages.events`).
Errors are in Anthropic's shape (the dispatcher's dialect for ``/v1/messages*``).
count_tokens answers ``{"input_tokens": N}``, the rendered prompt's length, and is not
admission-limited.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from server.choice import ChatChoice
from server.edge import Receive, Scope, Send, read_body, send_json
from server.error import LIMIT_FLAG
from server.messages.events import MessageShapes
from server.messages.request import translate
from server.parsers.reasoning import markers_of
from server.prompt import Prompt

if TYPE_CHECKING:
    from server.routes import App

__all__ = ["count_tokens", "messages"]

_encode = msgspec.json.Encoder().encode


async def messages(app: App, scope: Scope, receive: Receive, send: Send) -> None:
    reasoning = app.prompts.reasoning_markers is not None

    async def build(body: bytes) -> list[Prompt]:
        chat = translate(body, reasoning=reasoning)
        return [await app.prompts.chat(_encode(chat))]

    def shapes_of(prompts: list[Prompt], rid: str) -> MessageShapes:
        prompt = prompts[0]
        assert prompt.chat is not None
        choice = ChatChoice(0, prompt.chat, markers_of(app.options.reasoning_parser), None,
                            app.token_texts)
        return MessageShapes(rid.split("-", 1)[1], app.model_name, choice, len(prompt.ids))

    await app.generate(receive, send, build, shapes_of, "msg")


async def count_tokens(app: App, scope: Scope, receive: Receive, send: Send) -> None:
    body = await read_body(receive, app.options.max_request_body, LIMIT_FLAG)
    chat = translate(body, reasoning=app.prompts.reasoning_markers is not None, count=True)
    prompt = await app.prompts.chat(_encode(chat))
    await send_json(send, 200, _encode({"input_tokens": len(prompt.ids)}))
