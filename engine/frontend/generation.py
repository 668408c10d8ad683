"""One request's output pipeline: engine outputs -> incremental detokenizer -> stop
strings -> text pieces, with the token counts for ``usage``.

Mirrors ``rust/cli/src/stream.rs``: outputs already queued are merged into one piece
(a slow client gets fewer, larger events), a stop token is counted but not shown, a stop
string aborts the engine request and finishes with ``stop``, and an engine failure
raises :class:`APIError` (503 when the engine died, 500 when it failed this request).
"""

from __future__ import annotations

import time

from engine import protocol as p
from engine.frontend.client import ClientDisconnected, EngineClient, RequestStream
from engine.frontend.errors import APIError, ErrorKind
from engine.frontend.text import IncrementalDetokenizer, StopMatcher

_ERROR = p.FinishReason.ERROR.value


class Generation:
    """A running request as the HTTP layer sees it."""

    __slots__ = ("client", "request_id", "prompt_tokens", "completion_tokens",
                 "finish_reason", "_detok", "_stop", "_stream")

    def __init__(
        self,
        client: EngineClient,
        request_id: str,
        prompt_ids: list[int],
        params: p.SamplingParams,
        detokenizer: IncrementalDetokenizer,
        stop: list[str],
    ) -> None:
        self.client = client
        self.request_id = request_id
        self.prompt_tokens = len(prompt_ids)
        self.completion_tokens = 0
        self.finish_reason: str | None = None
        self._detok = detokenizer
        self._stop = StopMatcher(stop) if stop else None
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

    async def next(self) -> tuple[str, str | None] | None:
        """The next (text, finish_reason): text is non-empty unless this is the last piece
        (finish_reason set); None after the last. Raises APIError if the engine fails,
        ClientDisconnected after :meth:`cancel`."""
        if self.finish_reason is not None:
            return None
        parts: list[str] = []
        while True:
            for output in await self._stream.get():
                reason = self._absorb(output, parts)
                if reason is not None:
                    self.finish_reason = reason
                    return "".join(parts), reason
            text = "".join(parts)
            if text:
                return text, None

    async def text(self) -> str:
        """Everything, for a non-streamed response."""
        pieces = []
        while (piece := await self.next()) is not None:
            pieces.append(piece[0])
        return "".join(pieces)

    def _absorb(self, output: p.EngineCoreOutput, parts: list[str]) -> str | None:
        """Adds one output's text to ``parts``; returns the finish reason when it ended."""
        ids = output.new_token_ids
        stop_id = output.stop_token_id
        visible = ids[:-1] if stop_id is not None and ids and ids[-1] == stop_id else ids
        self.completion_tokens += len(ids)
        finish = output.finish_reason
        text = self._detok.push(visible)
        if finish is not None:
            text += self._detok.finish()
        if self._stop is not None:
            emit, stopped = self._stop.push(text)
            parts.append(emit)
            if stopped:  # our own stop: the engine may still be generating
                self.client.abort(self._stream)
                return p.FinishReason.STOP.value
            if finish is not None:
                parts.append(self._stop.flush())
        else:
            parts.append(text)
        if finish == _ERROR:
            self.finish_reason = _ERROR
            raise APIError(ErrorKind.INTERNAL,
                           output.error_message or "the engine failed this request")
        return finish
