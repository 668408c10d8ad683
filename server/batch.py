"""Batched prompts: a completions request's ``prompt`` as a list of prompts, fanned out
into prompts x ``n`` engine requests, whose choices and usage merge into one response.

Mirrors ``rust/server/src/output/batch.rs``. ``prompt`` is a string, a list of token ids
(one prompt) or a list of prompts, each a string or a list of token ids; an empty list, or
an empty prompt inside a list, is a 400, and so are more than ``--max-batch-prompts``
prompts.
Choice ``j`` of prompt ``i`` has index ``i * n + j``; an engine request's id is the
response id, with ``-<index>`` when the response has more than one choice; a child's
seed is the request's seed + ``j``. ``usage.prompt_tokens`` counts each prompt once (not
once per choice, as vLLM), and so does ``prompt_tokens_details.cached_tokens`` (as the
prompt's first choice found them), ``completion_tokens`` every choice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

from server import openai as s
from server.engine_client import EngineClient
from server.error import APIError, bad_request
from server.generation import Generation
from server.metrics import Metrics
from server.queue import Queue
from server.text import ModelText
from server.vllm_metrics import Siblings

if TYPE_CHECKING:
    from server.prompt import Prompt
    from server.trace import RequestTrace

DEFAULT_MAX_BATCH_PROMPTS = 256
U32_END = 2**32
_SHAPES = (
    "invalid value for `prompt`: a string, a list of strings, a list of token "
    "ids, or a list of lists of token ids"
)


def _token_list(value: Any) -> bool:
    return type(value) is list and all(type(t) is int and 0 <= t < U32_END for t in value)


def completion_prompts(
    request: s.CompletionRequest, vocab_size: int, limit: int
) -> list[str | list[int]]:
    """The prompts of a completions request: texts to encode, or token ids (checked
    against the vocabulary)."""
    prompt = request.prompt
    if prompt is None:
        raise bad_request("`prompt` is required", "prompt")
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise bad_request("`prompt` must not be an empty list", "prompt")
    prompts: list[str | list[int]]
    if all(type(t) is int for t in prompt) and _token_list(prompt):
        prompts = [list(prompt)]
    elif all(type(t) is str for t in prompt):
        prompts = list(prompt)
    elif all(_token_list(t) for t in prompt):
        prompts = [list(t) for t in prompt]
    else:
        raise bad_request(_SHAPES, "prompt")
    if len(prompts) > limit:
        raise bad_request(
            f"`prompt` has {len(prompts)} prompts; this server takes at most "
            f"{limit} in one request (--max-batch-prompts)",
            "prompt",
        )
    for index, item in enumerate(prompts):
        if len(item) == 0:
            raise bad_request(
                f"`prompt` must not contain an empty prompt (prompt {index} is empty)", "prompt"
            )
        if isinstance(item, list):
            for token in item:
                if token >= vocab_size:
                    raise bad_request(
                        f"token id {token} in `prompt` is out of the vocabulary "
                        f"(size {vocab_size})",
                        "prompt",
                    )
    return prompts


def fan_out(
    client: EngineClient,
    text: ModelText,
    metrics: Metrics,
    rid: str,
    prompts: list[Prompt],
    arrival: float,
    queue: Queue,
    trace: RequestTrace | None = None,
    reasoning: bool = False,
) -> list[Generation]:
    """One engine request per (prompt, choice), in choice-index order, each entered in
    ``queue`` first (a full queue refuses the request before anything reaches the
    engine), reporting to ``trace`` as choices of their prompt's index; on an error the
    ones already sent are aborted. ``reasoning``: the server has a reasoning parser, so a
    chat answer it splits counts its reasoning tokens (its pieces carry token offsets)."""
    total = sum(prompt.settings.n for prompt in prompts)
    try:
        tickets = queue.enter([len(p.ids) for p in prompts for _ in range(p.settings.n)])
    except APIError as error:
        if error.rejection is not None:
            metrics.reject(error.rejection)
        raise
    generations: list[Generation] = []
    try:
        for index, prompt in enumerate(prompts):
            settings = prompt.settings
            metrics.tokens(prompt=len(prompt.ids))
            siblings = Siblings(settings.n)
            offsets = reasoning and prompt.chat is not None and prompt.chat.splits_reasoning()
            for j in range(settings.n):
                sampling = settings.sampling
                request_id = rid
                if total > 1:
                    request_id = f"{rid}-{len(generations)}"
                if settings.n > 1:
                    sampling = msgspec.structs.replace(sampling)
                    if sampling.seed is not None:
                        sampling.seed = _wrap_i64(sampling.seed + j)
                detok = text.detokenizer(prompt.ids, settings.skip_special_tokens)
                generations.append(
                    Generation(
                        client,
                        request_id,
                        prompt.ids,
                        sampling,
                        detok,
                        settings.stop,
                        metrics,
                        arrival,
                        siblings,
                        echo_only=settings.echo_only,
                        constraint=settings.constraint,
                        trace=None if trace is None else (trace, index),
                        ticket=tickets[len(generations)],
                        token_offsets=offsets,
                    )
                )
    except APIError:
        for generation in generations:
            generation.close()
        for ticket in tickets:
            if ticket is not None:
                ticket.leave()
        raise
    return generations


def usage(generations: list[Generation], n: int) -> s.Usage:
    """The usage of a response whose choices (in index order, ``n`` per prompt) are
    ``generations``: each prompt once (its tokens, and its cached tokens as its first
    choice found them), the completions of every choice."""
    firsts = generations[::max(n, 1)]
    return s.Usage.of(sum(g.prompt_tokens for g in firsts),
                      sum(g.completion_tokens for g in generations),
                      sum(g.cached_tokens for g in firsts))


def _wrap_i64(value: int) -> int:
    """``value`` wrapped into i64 (a child's seed is the request's seed + its index)."""
    return (value + 2**63) % 2**64 - 2**63
