"""The outputs the engine builds for a request: its first output's extras, its final
output's decode time, an error, and the grammar's say on whether a sampled token ends it."""

from __future__ import annotations

import time

from engine import protocol as p
from engine.runtime.request import Request


def first_output(req: Request, out: p.EngineCoreOutput) -> None:
    """What only a request's first output carries: its prompt logprobs (sent once, then
    dropped: a recompute after preemption does not make them again) and its timings."""
    if req.prompt_logprobs is not None:
        out.prompt_logprobs = req.prompt_logprobs
        req.prompt_logprobs = None
    now = time.monotonic()
    scheduled = req.scheduled_at if req.scheduled_at is not None else now
    req.first_token_at = now
    out.queue_time = max(scheduled - req.received_at, 0.0)
    out.prefill_time = max(now - scheduled, 0.0)


def decode_time(req: Request) -> float | None:
    """What a request's final output carries: seconds from its first token to now (None
    when it had none)."""
    first = req.first_token_at
    return None if first is None else max(time.monotonic() - first, 0.0)


def advance_grammar(req: Request, token: int, done: bool) -> bool:
    """Feed the sampled ``token`` to the request's matcher; True when the request is done
    (it already was, or the grammar has ended: finish ``stop``)."""
    if not req.grammar.accept_token(token):
        raise RuntimeError(f"the grammar rejected the sampled token {token}")
    if req.grammar.is_terminated() and not done:
        # The stop token ended the grammar (ignore_eos kept append_token going).
        req.finish_reason = p.FinishReason.STOP.value
        req.stop_token_id = token
        return True
    return done


def error_output(
    request_id: str, message: str, num_cached: int = 0, kind: str | None = None
) -> p.EngineCoreOutput:
    return p.EngineCoreOutput(
        request_id,
        [],
        p.FinishReason.ERROR.value,
        error_message=message,
        num_cached_tokens=num_cached,
        error_kind=kind,
    )
