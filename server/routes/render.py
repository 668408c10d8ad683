"""The render routes of the engine-less render service (template + tokenization only):
``POST /v1/chat/completions/render``, ``/v1/completions/render``, ``/v1/responses/render``
and ``/v1/messages/render`` answer what the engine would receive (the service:
``server/lifecycle/render.py``). Rust: rust/server/src/routes/render.rs."""

from __future__ import annotations

from typing import Any

import msgspec

from engine.protocol import SamplingParams
from server import openai as s
from server.edge import Receive, Scope, Send, request_id, send_json
from server.edge.body import read_body
from server.routes.messages import chat_prompt as messages_chat_prompt
from server.routes.responses import chat_prompt
from server.routes.responses import request as responses_request
from server.state import RenderState
from server.validate.beam_search import check_render
from server.validate.prompt import Prompt

_encode = msgspec.json.Encoder().encode


def sampling_fields(sampling: SamplingParams) -> dict[str, Any]:
    """The sampling parameters field by field (``structured_outputs`` and ``thinking_budget``
    too, by name)."""
    fields = msgspec.structs.asdict(sampling)
    if sampling.structured_outputs is not None:
        fields["structured_outputs"] = msgspec.structs.asdict(sampling.structured_outputs)
    if sampling.thinking_budget is not None:
        fields["thinking_budget"] = msgspec.structs.asdict(sampling.thinking_budget)
    return fields


def rendered(prefix: str, model: str, prompt: Prompt) -> bytes:
    """The render answer for ``prompt`` (its request id with the serving prefix:
    ``server/edge/request_id.py``)."""
    return _encode(s.Rendered(
        request_id=request_id.public_id(prefix), model=model, prompt=prompt.text,
        prompt_token_ids=prompt.ids, sampling_params=sampling_fields(prompt.settings.sampling)))


async def chat(state: RenderState, scope: Scope, receive: Receive, send: Send) -> None:
    prompt = await state.prompts.chat(await read_body(receive))
    check_render(prompt.settings)
    await send_json(send, 200, rendered("chatcmpl", state.model_name, prompt))


async def responses(state: RenderState, scope: Scope, receive: Receive, send: Send) -> None:
    """The Responses body's chat request, rendered as chat render renders it."""
    translated = responses_request.translate(await read_body(receive))
    prompt = await chat_prompt(state.prompts, translated)
    await send_json(send, 200, rendered("resp", state.model_name, prompt))


async def completion(state: RenderState, scope: Scope, receive: Receive, send: Send) -> None:
    prompts = await state.prompts.completion(await read_body(receive))
    check_render(prompts[0].settings)
    if len(prompts) == 1:
        await send_json(send, 200, rendered("cmpl", state.model_name, prompts[0]))
        return
    answers = b",".join(rendered("cmpl", state.model_name, prompt) for prompt in prompts)
    await send_json(send, 200, b"[" + answers + b"]")


async def messages(state: RenderState, scope: Scope, receive: Receive, send: Send) -> None:
    prompt = await messages_chat_prompt(state.prompts, await read_body(receive))
    await send_json(send, 200, rendered("msg", state.model_name, prompt))
