"""``POST /v1/chat/completions``: the chat prompt builder, then the chat response shapes
(roles, ``echo``, ``prompt_logprobs``, continuous usage).
Rust: rust/server/src/routes/chat_completions.rs."""

from __future__ import annotations

import functools
import time

from server.dispatch import generate
from server.edge import Receive, Scope, Send
from server.output import response
from server.output.choice import ChatChoice
from server.parsers.reasoning import markers_of
from server.state import State
from server.validate.prompt import Prompt

ID_PREFIX = "chatcmpl"  # the response id: chatcmpl-<32 hex>


async def build(state: State, body: bytes) -> list[Prompt]:
    """The body's one prompt, through the chat prompt builder."""
    return [await state.prompts.chat(body)]


def shapes(state: State, prompts: list[Prompt], rid: str) -> response.Shapes:
    """The chat response shapes: ``n`` choices of the one prompt."""
    settings = prompts[0].settings
    created = int(time.time())
    top = settings.sampling.logprobs
    continuous = settings.continuous_usage
    prompt = prompts[0]
    assert prompt.chat is not None
    reasoning = markers_of(state.options.reasoning_parser)
    extras = settings.extras
    return response.ChatShapes(rid, created, state.model_name, [
        ChatChoice(i, prompt.chat, reasoning, top, state.token_texts, extras=extras)
        for i in range(settings.n)], len(prompt.ids), continuous,
        settings.prompt_logprobs, state.token_texts,
        prompt_ids=prompt.ids if extras.token_ids else None)


async def chat_completions(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await generate(state, receive, send, functools.partial(build, state),
                   functools.partial(shapes, state), ID_PREFIX)
