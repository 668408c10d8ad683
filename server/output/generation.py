"""One request's output pipeline: engine outputs -> incremental detokenizer -> stop strings ->
text pieces, with the token counts for ``usage`` and the engine's times. Outputs already
queued are merged into one piece (a slow client gets fewer, larger events); an engine
failure or a ``--max-queue-wait`` timeout (``server/edge/queue.py``) raises
:class:`APIError`; with ``token_offsets`` each piece says where each of its tokens' text
begins (for counting reasoning tokens), with ``token_ids`` the ids of the tokens it counts
(``return_token_ids``). Mirrors ``rust/server/src/output/generation.rs``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import msgspec

from engine import protocol as p
from server.edge.error import APIError, ErrorKind
from server.edge.metrics import Metrics, Rejection
from server.edge.queue import Ticket
from server.edge.vllm_metrics import Siblings
from server.engine_client import ClientDisconnected, EngineClient, RequestStream
from server.text import IncrementalDetokenizer, StopMatcher

if TYPE_CHECKING:
    from server.edge.trace import RequestTrace

_ERROR = p.FinishReason.ERROR.value
_LENGTH = p.FinishReason.LENGTH.value
_INVALID = p.ErrorKind.INVALID_REQUEST.value


class Piece(msgspec.Struct):
    """What the client gets next: text (non-empty unless this is the last piece), the
    finish reason on the last, and the logprobs of the piece's visible tokens."""

    text: str
    finish: str | None
    logprobs: list[p.TokenLogprobs]
    prompt_logprobs: list[p.TokenLogprobs] | None = None
    stop_sequence: str | None = None  # the stop string that ended the generation (last piece)
    # With ``token_offsets``: for each completion token this piece counts, the offset in the
    # generation's whole text (every piece's text, before a stop string cut it) where the
    # token's text begins; a token without text of its own (the stop token, or a byte of a
    # character still incomplete) is at the text's end then.
    token_offsets: list[int] = msgspec.field(default_factory=list)
    # With ``token_ids``: the completion tokens this piece counts (return_token_ids).
    token_ids: list[int] = msgspec.field(default_factory=list)


class Generation:
    """A running request as the HTTP layer sees it."""

    __slots__ = ("client", "request_id", "prompt_tokens", "completion_tokens",
                 "cached_tokens", "finish_reason", "_detok", "_stop", "_stream", "_metrics",
                 "_arrival", "_first", "_last", "_ended", "_failed", "_engine", "_siblings",
                 "_echo_only", "_queue", "_prefill", "_constraint", "_trace", "_ticket",
                 "_offsets", "_text_len", "_ids")

    def __init__(
        self,
        client: EngineClient,
        request_id: str,
        prompt_ids: list[int],
        params: p.SamplingParams,
        detokenizer: IncrementalDetokenizer,
        stop: list[str],
        metrics: Metrics,
        arrival: float,
        siblings: Siblings,
        *,
        echo_only: bool = False,
        constraint: str | None = None,
        trace: tuple[RequestTrace, int] | None = None,
        ticket: Ticket | None = None,
        token_offsets: bool = False,
        replay: RequestStream | None = None,
        priority: int = 0,
        cache_salt: str | None = None,
        token_ids: bool = False,
    ) -> None:
        self.client = client
        self.request_id = request_id
        self.prompt_tokens = len(prompt_ids)
        self.completion_tokens = 0
        self.cached_tokens = 0  # the prompt tokens found in the engine's prefix cache
        self.finish_reason: str | None = None
        self._detok = detokenizer
        self._stop = StopMatcher(stop) if stop else None
        self._metrics = metrics
        self._arrival = arrival  # time.perf_counter() when the HTTP request arrived
        self._first: float | None = None  # when the first output with tokens came
        self._last: float | None = None  # when the latest output with tokens came
        self._ended: float | None = None  # when it finished (its end-to-end latency)
        self._failed = False  # the engine failed it or died: no vllm:request_success
        self._siblings: Siblings | None = siblings  # the request's n choices
        self._echo_only = echo_only
        self._constraint = constraint  # the field of its structured-output constraint
        self._queue: float | None = None  # the engine's queue and prefill times
        self._prefill: float | None = None
        self._trace = trace  # the request's trace and this choice's prompt index
        self._ticket = ticket  # its place in the queue until its first output
        # Whether pieces carry their tokens' offsets (then the text is detokenized token by
        # token), and the characters of text so far.
        self._offsets = token_offsets
        self._text_len = 0
        self._ids = token_ids  # whether pieces carry their token ids
        # ``replay``: outputs the frontend computed (a beam search's), no engine request.
        if replay is not None:
            self._stream: RequestStream = replay
        else:
            request = p.EngineCoreRequest(request_id, prompt_ids, params, time.time(),
                                          priority, cache_salt)
            self._stream = client.add(request)
        # The engine it was routed to: the ``engine`` label of the vllm:* series.
        self._engine = int.from_bytes(self._stream.identity, "little")

    def cancel(self) -> None:
        """The client went away: wake the consumer, which then ends the request."""
        if self.finish_reason is None:
            self._stream.fail(ClientDisconnected())

    def close(self) -> None:
        """Abort the engine request unless it has finished (idempotent); the first call
        reports the request to the vllm:* series."""
        if self._siblings is None:
            return
        if self._ticket is not None:
            self._ticket.leave()
            self._ticket = None
        if self.finish_reason is None:
            self.finish_reason = "abort"
            self.client.abort(self._stream)
        self._report()

    def _report(self) -> None:
        """A finished request by its reason (``abort`` when the client went away or the
        deadline passed); a failed one only as one of its siblings. Mirrors ``report``
        in rust/server/src/output/generation.rs."""
        siblings, self._siblings = self._siblings, None
        vllm = self._metrics.vllm
        reason = self.finish_reason
        if reason is not None and reason != _ERROR and not self._failed:
            ended = self._ended if self._ended is not None else time.perf_counter()
            decode = (None if self._first is None or self._last is None
                      else self._last - self._first)
            vllm.finished(self._engine, reason, ended - self._arrival, decode,
                          self.prompt_tokens, self.completion_tokens, self._queue,
                          self._prefill)
        most = siblings.done(self.completion_tokens) if siblings is not None else None
        if most is not None:
            vllm.max_generation(self._engine, most)
        if self._trace is not None:
            self._trace[0].finished(_ERROR if self._failed else reason or "abort",
                                    self.completion_tokens)

    async def next(self) -> Piece | None:
        """The next piece; None after the last. Raises APIError if the engine fails,
        ClientDisconnected after :meth:`cancel`."""
        if self.finish_reason is not None:
            return None
        parts: list[str] = []
        logprobs: list[p.TokenLogprobs] = []
        offsets: list[int] = []
        ids: list[int] = []
        prompt_logprobs: list[p.TokenLogprobs] | None = None
        while True:
            try:
                outputs = await (self._stream.get() if self._ticket is None
                                 else self._first_outputs(self._ticket))
            except APIError:
                self._failed = True
                raise
            for output in outputs:
                if output.prompt_logprobs is not None:
                    prompt_logprobs = output.prompt_logprobs
                if output.num_cached_tokens > self.cached_tokens:
                    self.cached_tokens = min(output.num_cached_tokens, self.prompt_tokens)
                if output.queue_time is not None:
                    self._queue, self._prefill = output.queue_time, output.prefill_time
                if self._trace is not None:
                    self._trace[0].output(self._trace[1], output)
                reason = self._absorb(output, parts, logprobs, offsets, ids)
                if reason is not None:
                    self.finish_reason = reason
                    matched = self._stop.matched if self._stop is not None else None
                    return Piece("".join(parts), reason, logprobs, prompt_logprobs, matched,
                                 offsets, ids)
            text = "".join(parts)
            if text or logprobs:
                return Piece(text, None, logprobs, prompt_logprobs, token_offsets=offsets,
                             token_ids=ids)

    async def _first_outputs(self, ticket: Ticket) -> list[p.EngineCoreOutput]:
        """The first outputs, which take the request off the queue; past the ticket's
        deadline the engine request is aborted and the queue's 503 raised."""
        try:
            if ticket.deadline is None:
                outputs = await self._stream.get()
            else:
                loop = asyncio.get_running_loop()
                wait = max(0.0, ticket.deadline - time.monotonic())
                async with asyncio.timeout_at(loop.time() + wait):
                    outputs = await self._stream.get()
        except TimeoutError:
            error = ticket.timeout_error()
            ticket.leave()
            self._ticket = None
            self.finish_reason = p.FinishReason.ABORT.value
            self.client.abort(self._stream)
            self._metrics.reject(Rejection.QUEUE_WAIT_TIMEOUT)
            raise error from None
        ticket.leave()
        self._ticket = None
        return outputs

    def _absorb(self, output: p.EngineCoreOutput, parts: list[str],
                logprobs: list[p.TokenLogprobs], offsets: list[int],
                counted: list[int]) -> str | None:
        """Adds one output's text to ``parts`` (its tokens' places to ``offsets``, the
        tokens it counts to ``counted`` when pieces carry them); returns the finish reason
        when it ended."""
        if self._echo_only:
            return self._absorb_dropped(output)
        ids = output.new_token_ids
        stop_id = output.stop_token_id
        visible = ids[:-1] if stop_id is not None and ids and ids[-1] == stop_id else ids
        shown_before = len(logprobs)
        if output.new_logprobs:
            logprobs.extend(output.new_logprobs[:len(visible)])
        finish = output.finish_reason
        started = time.perf_counter()
        placed = len(offsets)
        stop = self._stop
        if stop is not None:
            # Token by token, so that a stop string ends the count at the token that
            # completes it, however many tokens the engine's output carried.
            for i, token in enumerate(visible):
                emit, stopped = stop.push(self._token_text(token, offsets))
                parts.append(emit)
                if stopped:
                    del logprobs[shown_before + i + 1:]
                    self._take_ids(counted, ids, i + 1)
                    return self._stopped_at(started, i + 1, offsets, placed)
            if finish is not None:
                emit, stopped = stop.push(self._final_text())
                parts.append(emit)
                if stopped:
                    self._take_ids(counted, ids, len(ids))
                    return self._stopped_at(started, len(ids), offsets, placed)
                parts.append(stop.flush())
        elif self._offsets:
            parts.extend(self._token_text(token, offsets) for token in visible)
            if finish is not None:
                parts.append(self._final_text())
        else:
            text = self._detok.push(visible)
            if finish is not None:
                text += self._detok.finish()
            parts.append(text)
        self._metrics.detokenize.observe(time.perf_counter() - started)
        self._place_rest(offsets, placed, len(ids))
        self._take_ids(counted, ids, len(ids))
        self._count(len(ids))
        if finish is not None:
            self._end()
        if finish == _ERROR:
            self.finish_reason = _ERROR
            raise self._error(output)
        return finish

    def _take_ids(self, counted: list[int], ids: list[int], tokens: int) -> None:
        """The output's first ``tokens`` ids, counted, into ``counted`` when pieces carry
        their token ids."""
        if self._ids:
            counted.extend(ids[:tokens])

    def _token_text(self, token: int, offsets: list[int]) -> str:
        """One token's text, its place noted when pieces carry offsets."""
        text = self._detok.push((token,))
        if self._offsets:
            offsets.append(self._text_len)
        self._text_len += len(text)
        return text

    def _final_text(self) -> str:
        text = self._detok.finish()
        self._text_len += len(text)
        return text

    def _place_rest(self, offsets: list[int], placed: int, tokens: int) -> None:
        """With offsets, the output's ``tokens`` (counted from ``placed``) that have no
        place yet (the stop token) are placed at the text's end."""
        if self._offsets:
            offsets.extend([self._text_len] * (tokens - (len(offsets) - placed)))

    def _stopped_at(self, started: float, tokens: int, offsets: list[int], placed: int) -> str:
        """The end at our own stop string, completed by the ``tokens``-th token of the
        output whose detokenizing began at ``started`` (its offsets from ``placed``): the
        engine may still be generating."""
        self._place_rest(offsets, placed, tokens)
        self._metrics.detokenize.observe(time.perf_counter() - started)
        self._count(tokens)
        self.client.abort(self._stream)
        self._end()
        return p.FinishReason.STOP.value

    def _absorb_dropped(self, output: p.EngineCoreOutput) -> str | None:
        """An echo-only request's output: its token is not shown nor counted."""
        self._count(len(output.new_token_ids), shown=False)
        if output.finish_reason == _ERROR:
            self._end()
            self.finish_reason = _ERROR
            raise self._error(output)
        reason = output.finish_reason
        if reason is None and not output.new_token_ids:
            return None
        # The engine generated its one token: the prompt is all there is.
        self._end()
        if reason is None:
            self.client.abort(self._stream)
        return _LENGTH if reason in (None, _LENGTH, p.FinishReason.STOP.value) else reason

    def _error(self, output: p.EngineCoreOutput) -> APIError:
        """The engine failed the request: a 400 naming the constraint when its spec is at
        fault (it did not compile, or not in time), else a 500."""
        message = output.error_message or "the engine failed this request"
        if self._constraint is not None and output.error_kind == _INVALID:
            return APIError(ErrorKind.BAD_REQUEST, message, self._constraint)
        return APIError(ErrorKind.INTERNAL, message)

    def _end(self) -> None:
        self._ended = time.perf_counter()
        self._metrics.e2e.observe(self._ended - self._arrival)

    def _count(self, tokens: int, shown: bool = True) -> None:
        """``tokens`` generated (``shown``: counted in usage and the token metrics)."""
        if not tokens:
            return
        now = time.perf_counter()
        metrics = self._metrics
        since_last = None
        if self._last is None:
            metrics.ttft.observe(now - self._arrival)
            metrics.vllm.first_token(self._engine, self.prompt_tokens, now - self._arrival)
            self._first = now
            if self._trace is not None:
                self._trace[0].first_token()
        else:
            since_last = now - self._last
            metrics.itl.observe(since_last)
        self._last = now
        if not shown:
            return
        self.completion_tokens += tokens
        metrics.tokens(generation=tokens)
        metrics.vllm.generated(self._engine, tokens, since_last)
