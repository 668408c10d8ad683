"""Anthropic's Messages API on the chat pipeline: ``POST /v1/messages`` and ``POST
/v1/messages/count_tokens``. The body becomes the equivalent chat request
(:mod:`server.routes.messages.request`), served by the chat path; the one chat choice's
deltas become the message's content blocks and events (:mod:`server.routes.messages.events`).
Rust: rust/server/src/routes/messages.rs. Behaviour: docs/api.md, "Anthropic Messages API".
"""

from __future__ import annotations

import msgspec

from server.dispatch import generate
from server.edge import Receive, Scope, Send, send_json
from server.edge.error import APIError
from server.output.choice import ChatChoice
from server.parsers.reasoning import markers_of
from server.routes.messages.events import MessageShapes
from server.routes.messages.request import messages_param, translate
from server.state import State
from server.validate.prompt import Prompt, PromptBuilder

__all__ = ["chat_prompt", "count_tokens", "messages"]

_encode = msgspec.json.Encoder().encode


async def chat_prompt(prompts: PromptBuilder, body: bytes, count: bool = False) -> Prompt:
    """The Messages ``body`` translated, through the chat prompt builder; its errors name
    the Messages fields (``messages_param``), and so does the 400 of an engine that
    refuses its structured-output spec (the constraint's name)."""
    chat = translate(body, reasoning=prompts.reasoning_markers is not None, count=count,
                     merge_system=prompts.text.merges_inline_system)
    try:
        prompt = await prompts.chat(_encode(chat))
    except APIError as error:
        error.param = messages_param(error.param)
        raise
    prompt.settings.constraint = messages_param(prompt.settings.constraint)
    return prompt


async def messages(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    async def build(body: bytes) -> list[Prompt]:
        return [await chat_prompt(state.prompts, body)]

    def shapes_of(prompts: list[Prompt], rid: str) -> MessageShapes:
        prompt = prompts[0]
        assert prompt.chat is not None
        choice = ChatChoice(0, prompt.chat, markers_of(state.options.reasoning_parser), None,
                            state.token_texts)
        return MessageShapes(rid.split("-", 1)[1], state.model_name, choice, len(prompt.ids))

    await generate(state, receive, send, build, shapes_of, "msg")


async def count_tokens(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    prompt = await chat_prompt(state.prompts, await state.body(receive), count=True)
    await send_json(send, 200, _encode({"input_tokens": len(prompt.ids)}))
