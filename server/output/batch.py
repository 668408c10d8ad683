"""Batched prompts: a completions request's prompts x ``n`` fanned out into engine requests
(index, engine request id and seed of each choice), whose choices and usage merge into one
response. Mirrors ``rust/server/src/output/batch.rs``; the ``prompt`` shapes and their
checks are ``completion_prompts`` in :mod:`server.validate.prompt`. Behaviour: docs/api.md,
"Batched prompts (completions)".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from server import openai as s
from server.edge.error import APIError
from server.edge.metrics import Metrics
from server.edge.queue import Queue, Ticket
from server.edge.vllm_metrics import Siblings
from server.engine_client import EngineClient
from server.output.beam_search import Searched
from server.output.generation import Generation
from server.text import ModelText

if TYPE_CHECKING:
    from server.edge.trace import RequestTrace
    from server.validate.prompt import Prompt

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
    searched: list[Searched] | None = None,
) -> list[Generation]:
    """One engine request per (prompt, choice), in choice-index order, each entered in
    ``queue`` first (a full queue refuses the request before anything reaches the
    engine), reporting to ``trace`` as choices of their prompt's index; on an error the
    ones already sent are aborted. ``reasoning``: the server has a reasoning parser, so a
    chat answer it splits counts its reasoning tokens (its pieces carry token offsets).
    ``searched``: each prompt's beam search, done (``server/output/beam_search.py``): its
    choices replay its beams, and its steps have left the queue already."""
    total = sum(prompt.settings.n for prompt in prompts)
    tickets: list[Ticket | None] = [None] * total
    try:
        if searched is None:
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
                        replay=None if searched is None else searched[index].replay(
                            j, request_id),
                        priority=settings.priority,
                        cache_salt=settings.cache_salt,
                        token_ids=settings.extras.token_ids,
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
