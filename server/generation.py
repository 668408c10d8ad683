"""One request's output pipeline: engine outputs -> incremental detokenizer -> stop
strings -> text pieces, with the token counts for ``usage``.

Mirrors ``rust/server/src/output/generation.rs``: outputs already queued are merged into one piece
(a slow client gets fewer, larger events), a stop token is counted but not shown, a stop
string aborts the engine request and finishes with ``stop``, and an engine failure
raises :class:`APIError` (503 when the engine died, 500 when it failed this request).
"""

from __future__ import annotations

import time

import msgspec

from engine import protocol as p
from server.engine_client import ClientDisconnected, EngineClient, RequestStream
from server.error import APIError, ErrorKind
from server.metrics import Metrics
from server.text import IncrementalDetokenizer, StopMatcher

_ERROR = p.FinishReason.ERROR.value


class Piece(msgspec.Struct):
    """What the client gets next: text (non-empty unless this is the last piece), the
    finish reason on the last, and the logprobs of the piece's visible tokens."""

    text: str
    finish: str | None
    logprobs: list[p.TokenLogprobs]


class Generation:
    """A running request as the HTTP layer sees it."""

    __slots__ = ("client", "request_id", "prompt_tokens", "completion_tokens",
                 "finish_reason", "_detok", "_stop", "_stream", "_metrics", "_arrival",
                 "_last")

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
    ) -> None:
        self.client = client
        self.request_id = request_id
        self.prompt_tokens = len(prompt_ids)
        self.completion_tokens = 0
        self.finish_reason: str | None = None
        self._detok = detokenizer
        self._stop = StopMatcher(stop) if stop else None
        self._metrics = metrics
        self._arrival = arrival  # time.perf_counter() when the HTTP request arrived
        self._last: float | None = None  # when the latest output with tokens came
        request = p.EngineCoreRequest(request_id, prompt_ids, params, time.time())
        self._stream: RequestStream = client.add(request)

    def cancel(self) -> None:
        """The client went away: wake the consumer, which then ends the request."""
        if self.finish_reason is None:
            self._stream.fail(ClientDisconnected())

    def close(self) -> None:
        """Abort the engine request unless it has finished (idempotent)."""
        if self.finish_reason is None:
            self.finish_reason = "abort"
            self.client.abort(self._stream)

    async def next(self) -> Piece | None:
        """The next piece; None after the last. Raises APIError if the engine fails,
        ClientDisconnected after :meth:`cancel`."""
        if self.finish_reason is not None:
            return None
        parts: list[str] = []
        logprobs: list[p.TokenLogprobs] = []
        while True:
            for output in await self._stream.get():
                reason = self._absorb(output, parts, logprobs)
                if reason is not None:
                    self.finish_reason = reason
                    return Piece("".join(parts), reason, logprobs)
            text = "".join(parts)
            if text or logprobs:
                return Piece(text, None, logprobs)

    def _absorb(self, output: p.EngineCoreOutput, parts: list[str],
                logprobs: list[p.TokenLogprobs]) -> str | None:
        """Adds one output's text to ``parts``; returns the finish reason when it ended."""
        ids = output.new_token_ids
        stop_id = output.stop_token_id
        visible = ids[:-1] if stop_id is not None and ids and ids[-1] == stop_id else ids
        if output.new_logprobs:
            logprobs.extend(output.new_logprobs[:len(visible)])
        self._count(len(ids))
        finish = output.finish_reason
        started = time.perf_counter()
        text = self._detok.push(visible)
        if finish is not None:
            text += self._detok.finish()
        self._metrics.detokenize.observe(time.perf_counter() - started)
        if self._stop is not None:
            emit, stopped = self._stop.push(text)
            parts.append(emit)
            if stopped:  # our own stop: the engine may still be generating
                self.client.abort(self._stream)
                self._metrics.e2e.observe(time.perf_counter() - self._arrival)
                return p.FinishReason.STOP.value
            if finish is not None:
                parts.append(self._stop.flush())
        else:
            parts.append(text)
        if finish is not None:
            self._metrics.e2e.observe(time.perf_counter() - self._arrival)
        if finish == _ERROR:
            self.finish_reason = _ERROR
            raise APIError(ErrorKind.INTERNAL,
                           output.error_message or "the engine failed this request")
        return finish

    def _count(self, tokens: int) -> None:
        if not tokens:
            return
        now = time.perf_counter()
        metrics = self._metrics
        if self._last is None:
            metrics.ttft.observe(now - self._arrival)
        else:
            metrics.itl.observe(now - self._last)
        self._last = now
        self.completion_tokens += tokens
        metrics.tokens(generation=tokens)
