"""``POST /v1/completions``: the completions prompt builder (a batch of prompts fans out:
``server/output/batch.py``), then the completions response shapes (``echo``, logprobs).
Rust: rust/server/src/routes/completions.rs."""

from __future__ import annotations

import functools
import time

from server.dispatch import generate
from server.edge import Receive, Scope, Send
from server.output import response
from server.output.choice import CompletionChoice
from server.state import State
from server.validate.prompt import Prompt

ID_PREFIX = "cmpl"  # the response id: cmpl-<32 hex>


async def build(state: State, body: bytes) -> list[Prompt]:
    """The body's prompts (more than one for a batch)."""
    return await state.prompts.completion(body)


def shapes(state: State, prompts: list[Prompt], rid: str) -> response.Shapes:
    """The completions response shapes: ``n`` choices per prompt, prompt-major."""
    settings = prompts[0].settings
    created = int(time.time())
    top = settings.sampling.logprobs
    continuous = settings.continuous_usage
    choices: list[CompletionChoice] = []
    lengths: list[int] = []
    for prompt in prompts:
        echo = None
        if settings.echo:
            echo = prompt.text if prompt.text is not None else state.text.decode(
                prompt.ids, settings.skip_special_tokens)
        for _ in range(settings.n):
            choices.append(CompletionChoice(
                len(choices), echo, top, state.token_texts, prompt_ids=prompt.ids,
                echo_logprobs=settings.echo_logprobs is not None,
                prompt_logprobs=settings.prompt_logprobs, extras=settings.extras))
            lengths.append(len(prompt.ids))
    return response.CompletionShapes(rid, created, state.model_name, choices, lengths,
                                     settings.n, continuous)


async def completions(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    await generate(state, receive, send, functools.partial(build, state),
                   functools.partial(shapes, state), ID_PREFIX)
