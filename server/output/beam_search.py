"""Beam search (``use_beam_search``), run above the engine as vLLM runs it: each step asks
the engine for one token of every live beam with the top ``2 × n`` log-probabilities,
expands each beam by those candidates, keeps the ``n`` best by cumulative logprob, and
sets aside every beam that ends with an EOS token; after ``max_tokens`` steps (or when no
beam is left) the ``n`` best of the finished and the live beams, ranked by cumulative
logprob over their length to the power ``length_penalty``, are the choices. Mirrors
``rust/server/src/output/beam_search.rs`` step for step (same candidates, same order, same
ties), so both frontends give the same beams. Behaviour: docs/api.md, "Beam search".

The steps are ordinary engine requests on the existing wire: ADD with the prompt and the
beam's tokens, ``max_tokens`` 1, ``logprobs`` ``2 × n``, greedy (the candidates are the top
``2 × n`` then, as vLLM's at temperature 0), seeded ``seed + i`` for the search's ``i``-th
request when the request has a ``seed`` (reproducible on an engine that samples, such as
the mock one). The engine's prefix cache makes the re-sent prefixes cheap. Each step's
requests enter the bounded queue (``server/edge/queue.py``) as any others do. The
finished beams are then replayed to :class:`server.output.generation.Generation` as one
engine output each (its tokens without the EOS, its finish reason), so text, parsers,
usage and both response shapes are the ordinary ones.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import msgspec

from engine import protocol as p
from server.edge.error import APIError, ErrorKind
from server.edge.metrics import Metrics, Rejection
from server.edge.queue import Queue, Ticket
from server.engine_client import EngineClient, RequestStream
from server.validate.params import BeamSearch

if TYPE_CHECKING:
    from server.validate.prompt import Prompt

_STOP = p.FinishReason.STOP.value
_LENGTH = p.FinishReason.LENGTH.value
_ERROR = p.FinishReason.ERROR.value


class Beam(msgspec.Struct):
    """One sequence: its generated tokens (an ending EOS left out), their cumulative
    logprob, how many tokens it generated (the EOS included: the length the penalty
    divides by) and, once finished, why."""

    tokens: list[int]
    cum_logprob: float = 0.0
    steps: int = 0
    finish: str | None = None


def candidates(entry: p.TokenLogprobs) -> list[tuple[int, float]]:
    """A step's candidates as vLLM's logprobs dict holds them: the sampled token first,
    then the top ones in rank order; a token listed twice keeps its first place and its
    last logprob."""
    found = {entry.token_id: entry.logprob}
    for token, logprob in zip(entry.top_token_ids, entry.top_logprobs, strict=False):
        found[token] = logprob
    return list(found.items())


def score(beam: Beam, length_penalty: float) -> float:
    """The rank of a beam among the results (Transformers' and vLLM's length penalty)."""
    length: float = max(beam.steps, 1) ** length_penalty
    return beam.cum_logprob / length


class Search:
    """The beams of one prompt, step by step (no I/O: :func:`run` feeds it)."""

    def __init__(self, beam: BeamSearch, eos_token_ids: frozenset[int], ignore_eos: bool) -> None:
        self.width = beam.width
        self.length_penalty = beam.length_penalty
        self.eos: frozenset[int] = frozenset() if ignore_eos else eos_token_ids
        self.beams: list[Beam] = [Beam([])]
        self.completed: list[Beam] = []

    def advance(self, entries: list[p.TokenLogprobs]) -> None:
        """One step: ``entries[i]`` is the next token's logprobs of live beam ``i``."""
        expanded: list[tuple[float, Beam, int]] = []
        for beam, entry in zip(self.beams, entries, strict=True):
            for token, logprob in candidates(entry):
                cum = beam.cum_logprob + logprob
                if token in self.eos:
                    self.completed.append(Beam(beam.tokens, cum, beam.steps + 1, _STOP))
                else:
                    expanded.append((cum, beam, token))
        expanded.sort(key=lambda item: item[0], reverse=True)  # stable: ties keep their order
        self.beams = [Beam([*beam.tokens, token], cum, beam.steps + 1)
                      for cum, beam, token in expanded[:self.width]]

    def best(self) -> list[Beam]:
        """The ``width`` best of the finished and the live beams (live ones end at the
        length limit), best first."""
        done = self.completed + [Beam(b.tokens, b.cum_logprob, b.steps, _LENGTH)
                                 for b in self.beams]
        done.sort(key=lambda beam: score(beam, self.length_penalty), reverse=True)
        return done[:self.width]


class Searched(msgspec.Struct):
    """One prompt's search, done: its beams, the engine of its first step (the engine
    label of its choices' metrics) and the prompt tokens that step found cached."""

    beams: list[Beam]
    identity: bytes
    cached_tokens: int

    def replay(self, index: int, request_id: str) -> RequestStream:
        """Beam ``index`` as its choice's engine stream: one final output."""
        beam = self.beams[index]
        output = p.EngineCoreOutput(request_id, beam.tokens, beam.finish,
                                    num_cached_tokens=self.cached_tokens)
        return RequestStream.replay(request_id, self.identity, [output])


def step_params(width: int, seed: int | None) -> p.SamplingParams:
    """A step request's sampling: one greedy token with the top ``2 × width`` logprobs."""
    return p.SamplingParams(max_tokens=1, temperature=0.0, logprobs=2 * width, seed=seed)


def _wrap_i64(value: int) -> int:
    return (value + 2**63) % 2**64 - 2**63


async def run(client: EngineClient, queue: Queue, metrics: Metrics, rid: str,
              prompts: list[Prompt], eos_token_ids: frozenset[int]) -> list[Searched]:
    """Every prompt's search (at once), in prompt order; the first failure cancels the
    others (their engine requests are aborted)."""
    tasks = [asyncio.ensure_future(_search(client, queue, metrics, f"{rid}-{index}", prompt,
                                           eos_token_ids))
             for index, prompt in enumerate(prompts)]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


async def _search(client: EngineClient, queue: Queue, metrics: Metrics, rid: str,
                  prompt: Prompt, eos_token_ids: frozenset[int]) -> Searched:
    settings = prompt.settings
    beam = settings.beam_search
    assert beam is not None, "a beam search request has its beam settings"
    sampling = settings.sampling
    search = Search(beam, eos_token_ids, sampling.ignore_eos)
    sent = 0
    identity, cached = b"", 0
    for step in range(sampling.max_tokens):
        requests = []
        for i, live in enumerate(search.beams):
            seed = None if sampling.seed is None else _wrap_i64(sampling.seed + sent)
            sent += 1
            requests.append(p.EngineCoreRequest(f"{rid}-{step}-{i}", [*prompt.ids, *live.tokens],
                                                step_params(beam.width, seed), time.time(),
                                                prompt.settings.priority,
                                                prompt.settings.cache_salt))
        results = await _step(client, queue, metrics, requests)
        if step == 0:
            identity, cached = results[0][1], results[0][2]
        search.advance([entry for entry, _, _ in results])
        if not search.beams:
            break
    best = search.best()
    if len(best) < beam.width:
        raise APIError(ErrorKind.INTERNAL,
                       f"the beam search found {len(best)} sequences for n = {beam.width}: "
                       "the engine offered too few candidate tokens")
    return Searched(best, identity, min(cached, len(prompt.ids)))


async def _step(client: EngineClient, queue: Queue, metrics: Metrics,
                requests: list[p.EngineCoreRequest]) -> list[tuple[p.TokenLogprobs, bytes, int]]:
    """Sends one step's requests (through the queue) and waits for each one's token:
    (its logprobs, its engine, its cached prompt tokens). Whatever ends it early aborts
    the requests still running."""
    try:
        tickets = queue.enter([len(r.prompt_token_ids) for r in requests])
    except APIError as error:
        if error.rejection is not None:
            metrics.reject(error.rejection)
        raise
    streams: list[RequestStream] = []
    try:
        for request in requests:
            streams.append(client.add(request))
        return [await _answer(stream, ticket, metrics)
                for stream, ticket in zip(streams, tickets, strict=True)]
    finally:
        for stream in streams:
            client.abort(stream)  # a finished one is no longer the client's: nothing sent
        for ticket in tickets:
            if ticket is not None:
                ticket.leave()


async def _answer(stream: RequestStream, ticket: Ticket | None,
                  metrics: Metrics) -> tuple[p.TokenLogprobs, bytes, int]:
    """A step request's token (see :func:`_step`); past the queue's deadline, its 503."""
    entry: p.TokenLogprobs | None = None
    cached = 0
    while True:
        if ticket is not None and ticket.deadline is not None:
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout_at(loop.time() + max(0.0, ticket.deadline
                                                                - time.monotonic())):
                    outputs = await stream.get()
            except TimeoutError:
                metrics.reject(Rejection.QUEUE_WAIT_TIMEOUT)
                raise ticket.timeout_error() from None
        else:
            outputs = await stream.get()
        if ticket is not None:
            ticket.leave()
            ticket = None
        for output in outputs:
            cached = max(cached, output.num_cached_tokens)
            if entry is None and output.new_logprobs:
                entry = output.new_logprobs[0]
            reason = output.finish_reason
            if reason is None:
                continue
            if reason == _ERROR or entry is None:
                message = output.error_message or (
                    "the engine failed a beam search step" if reason == _ERROR
                    else f"the engine ended a beam search step ({reason}) without its token")
                raise APIError(ErrorKind.INTERNAL, message)
            return entry, stream.identity, cached
