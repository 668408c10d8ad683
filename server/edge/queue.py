"""The bounded queue in front of the engine (``--max-num-queued-reqs``,
``--max-num-queued-tokens``, ``--max-queue-wait``), as ``rust/server/src/edge/queue.rs``: a
generation request enters whole before anything reaches the engine, and each engine request
holds a :class:`Ticket` that leaves the queue at its first output (or when it ends without
one) and carries its wait deadline. With no bound set the queue is off and costs nothing.
Behaviour: docs/api.md, "Queue limits".
"""

from __future__ import annotations

import time

from server.edge.error import RETRY_AFTER, APIError, ErrorKind, QueueTimeoutError, bad_request
from server.edge.metrics import Rejection


class Ticket:
    """One queued engine request; :meth:`leave` (idempotent) takes it off the queue."""

    __slots__ = ("_queue", "tokens", "deadline")

    def __init__(self, queue: Queue, tokens: int, deadline: float | None) -> None:
        self._queue: Queue | None = queue
        self.tokens = tokens
        self.deadline = deadline  # time.monotonic() when it stops waiting, if ever

    def leave(self) -> None:
        queue, self._queue = self._queue, None
        if queue is not None:
            queue.reqs -= 1
            queue.tokens -= self.tokens

    def timeout_error(self) -> QueueTimeoutError:
        """The error of a request still queued at its deadline (503, ``Retry-After``)."""
        max_wait = self._queue.max_wait if self._queue is not None else None
        # A ticket has a deadline only when the queue has a max_wait (unwrap_or_default in
        # queue.rs)
        return queue_timeout(max_wait if max_wait is not None else 0.0)


class Queue:
    """Engine requests queued and their prompt tokens, under the limits (all None: off).
    Used from the event loop only: no lock."""

    def __init__(self, max_reqs: int | None = None, max_tokens: int | None = None,
                 max_wait: float | None = None) -> None:
        self.max_reqs = max_reqs
        self.max_tokens = max_tokens
        self.max_wait = max_wait
        self.on = max_reqs is not None or max_tokens is not None or max_wait is not None
        self.reqs = 0
        self.tokens = 0

    def enter(self, prompt_tokens: list[int]) -> list[Ticket | None]:
        """One ticket per engine request whose prompt has ``prompt_tokens[i]`` tokens (None
        when the queue is off); raises the 503 (a bound would be passed) or the 400 (the
        request alone passes one)."""
        if not self.on:
            return [None] * len(prompt_tokens)
        reqs, tokens = len(prompt_tokens), sum(prompt_tokens)
        max_reqs, max_tokens = self.max_reqs, self.max_tokens
        if max_reqs and reqs > max_reqs:
            raise bad_request(
                f"this request makes {reqs} engine requests (prompts × n) and the server "
                f"queues at most {max_reqs} (--max-num-queued-reqs); send fewer prompts or "
                "a smaller n")
        if max_tokens and tokens > max_tokens:
            raise bad_request(
                f"this request's prompts have {tokens} tokens (each counted once per "
                f"choice) and the server queues at most {max_tokens} "
                "(--max-num-queued-tokens); send a shorter prompt")
        if max_reqs is not None and self.reqs + reqs > max_reqs:
            raise queue_full(
                Rejection.QUEUE_FULL_REQUESTS,
                f"the server's queue is full: {self.reqs} requests wait for the engine and "
                f"it queues at most {max_reqs} (--max-num-queued-reqs); retry later")
        if max_tokens is not None and self.tokens + tokens > max_tokens:
            raise queue_full(
                Rejection.QUEUE_FULL_TOKENS,
                f"the server's queue is full: {self.tokens} prompt tokens wait for the "
                f"engine, this request has {tokens} and it queues at most {max_tokens} "
                "(--max-num-queued-tokens); retry later")
        self.reqs += reqs
        self.tokens += tokens
        deadline = None if self.max_wait is None else time.monotonic() + self.max_wait
        return [Ticket(self, n, deadline) for n in prompt_tokens]


def queue_full(reason: Rejection, message: str) -> APIError:
    error = APIError(ErrorKind.ENGINE_DEAD, message, headers=[RETRY_AFTER])
    error.rejection = reason
    return error


def queue_timeout(max_wait: float) -> QueueTimeoutError:
    return QueueTimeoutError(
        f"the request waited {max_wait:g} s for the engine without starting (the server's "
        "--max-queue-wait); retry later")
