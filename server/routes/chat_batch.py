"""``POST /v1/chat/completions/batch`` (vLLM's batched chat): ``messages`` is a list of
conversations; each is checked and rendered as a chat request of its own (every chat check;
an error inside conversation ``i`` names ``messages[i]...``), all are sent to the engine
together, and the answer is one chat completion whose choice ``i`` answers conversation
``i``. Not streamed, no tool calls, one choice per conversation. Rust:
rust/server/src/routes/chat_batch.rs. Behaviour: docs/api.md, "Batched chat".
"""

from __future__ import annotations

import functools
import time
from typing import Any

import msgspec

from server.dispatch import generate
from server.edge import Receive, Scope, Send
from server.edge.error import APIError, bad_request
from server.output import response
from server.output.choice import ChatChoice
from server.parsers.reasoning import markers_of
from server.routes.chat_completions import ID_PREFIX
from server.state import State
from server.validate.params import decode_object
from server.validate.prompt import Prompt

_encode = msgspec.json.Encoder().encode


def conversations(raw: dict[str, Any], limit: int) -> list[list[Any]]:
    """``messages``: a non-empty list (at most ``limit``: ``--max-batch-prompts``) of
    non-empty lists of messages (the messages themselves are the chat checks' business)."""
    batch = raw.get("messages")
    if batch is None:
        raise bad_request("`messages` is required", "messages")
    if not isinstance(batch, list):
        raise bad_request("invalid value for `messages`: expected a list of conversations, "
                          "each a list of messages", "messages")
    if not batch:
        raise bad_request("`messages` must not be empty", "messages")
    if len(batch) > limit:
        raise bad_request(f"`messages` holds {len(batch)} conversations; at most {limit} are "
                          f"allowed per request (--max-batch-prompts {limit})", "messages")
    for i, conversation in enumerate(batch):
        if not isinstance(conversation, list):
            raise bad_request(f"invalid value for `messages[{i}]`: expected a list of "
                              "messages", f"messages[{i}]")
        if not conversation:
            raise bad_request(f"`messages[{i}]` must not be empty", f"messages[{i}]")
    return batch


def check_batch_limits(raw: dict[str, Any]) -> None:
    """What a batch cannot do, as vLLM's batch request: stream, ``n`` > 1, tool calls (its
    ``tool_choice`` is "none"), and the top-level ``prompt_logprobs`` of one prompt."""
    if raw.get("stream") is True:
        raise bad_request("batch chat completions are not streamed: send `stream` false or "
                          "leave it out", "stream")
    n = raw.get("n")
    if type(n) is int and n != 1:
        raise bad_request(f"batch chat completions make one choice per conversation: "
                          f"`n` must be 1, got {n}", "n")
    choice = raw.get("tool_choice")
    if choice is not None and choice != "none":
        raise bad_request("batch chat completions make no tool calls: `tool_choice` must be "
                          "\"none\" (the default here); `tools` still reach the chat "
                          "template", "tool_choice")
    if raw.get("prompt_logprobs") is not None:
        raise bad_request("`prompt_logprobs` is not supported by batch chat completions",
                          "prompt_logprobs")


def in_conversation(param: str | None, index: int) -> str | None:
    """A chat error's ``param`` as the batch names it: ``messages...`` of conversation
    ``index`` is ``messages[index]...``; other fields keep their names."""
    if param is not None and (param == "messages" or param.startswith("messages[")):
        return f"messages[{index}]{param[len('messages'):]}"
    return param


async def build(state: State, body: bytes) -> list[Prompt]:
    """One chat prompt per conversation, checked in order: the JSON object, ``messages``,
    the batch's limits, then each conversation's chat checks."""
    raw = decode_object(body)
    batch = conversations(raw, state.options.max_batch_prompts)
    check_batch_limits(raw)
    base = dict(raw)  # the conversation goes where the body has `messages`
    if base.get("tool_choice") is None:
        base["tool_choice"] = "none"
    prompts = []
    for i, conversation in enumerate(batch):
        base["messages"] = conversation
        try:
            prompts.append(await state.prompts.chat(_encode(base)))
        except APIError as error:
            param = in_conversation(error.param, i)
            if param != error.param:  # the message names the path as the param does
                error.message = error.message.replace(f"`{error.param}`", f"`{param}`")
                error.param = param
            raise
    return prompts


def shapes(state: State, prompts: list[Prompt], rid: str) -> response.Shapes:
    """The chat response shapes: choice ``i`` answers conversation ``i``."""
    settings = prompts[0].settings
    reasoning = markers_of(state.options.reasoning_parser)
    choices = []
    for i, prompt in enumerate(prompts):
        assert prompt.chat is not None
        choices.append(ChatChoice(i, prompt.chat, reasoning, settings.sampling.logprobs,
                                  state.token_texts))
    return response.ChatShapes(rid, int(time.time()), state.model_name, choices,
                               [len(prompt.ids) for prompt in prompts])


async def chat_batch(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await generate(state, receive, send, functools.partial(build, state),
                   functools.partial(shapes, state), ID_PREFIX)
