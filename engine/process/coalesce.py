"""Step coalescing: the steps the output thread finds waiting go out as one message.

The busy loop hands each step's outputs to the output thread as a :class:`StepResult`.
While the output socket keeps up (a real model's steps take milliseconds), every step is
sent alone, as soon as it is made. When steps come faster than messages can be encoded
and sent (the mock engine, tiny models, bursts of aborts), the output thread takes all
the steps waiting for it and sends them as one ``EngineOutputs``: a request's outputs
from consecutive steps become one ``EngineCoreOutput`` with all the new tokens (and
logprobs) in order, the last step's finish, and the first output's prompt logprobs and
queue / prefill times. Nothing waits for a batch to fill, so no
output is ever sent later than it would have been, and the frontend reads fewer,
fuller messages (vLLM's frontend merges undelivered outputs the same way, on its side).

A step that answers a utility call closes its message: the call's answer goes out with
the outputs made before it, never ahead of them. A request id that reappears after its
finish (a reused id) also starts a new message, so two requests are never merged.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine import protocol as p


@dataclass(slots=True)
class StepResult:
    """What one pass of the busy loop produced, in the order it was produced."""

    outputs: list[p.EngineCoreOutput]
    scheduler_stats: p.SchedulerStats | None
    timestamp: float
    utility_output: p.UtilityOutput | None = None


def _merge(into: p.EngineCoreOutput, later: p.EngineCoreOutput) -> None:
    """Append ``later`` (the same request, a later step) to ``into``."""
    into.new_token_ids.extend(later.new_token_ids)
    if later.new_logprobs is not None:
        if into.new_logprobs is None:
            into.new_logprobs = list(later.new_logprobs)
        else:
            into.new_logprobs.extend(later.new_logprobs)
    if later.finish_reason is not None:
        into.finish_reason = later.finish_reason
        into.stop_token_id = later.stop_token_id
        into.error_message = later.error_message
        into.error_kind = later.error_kind
        into.decode_time = later.decode_time
        into.pooling_output = later.pooling_output
    if later.num_cached_tokens > into.num_cached_tokens:
        into.num_cached_tokens = later.num_cached_tokens
    # What only a request's first output carries (prompt logprobs, queue and prefill
    # times) is kept wherever in the run it was.
    if later.prompt_logprobs is not None and into.prompt_logprobs is None:
        into.prompt_logprobs = later.prompt_logprobs
    if later.queue_time is not None and into.queue_time is None:
        into.queue_time = later.queue_time
    if later.prefill_time is not None and into.prefill_time is None:
        into.prefill_time = later.prefill_time


def _message(
    merged: dict[str, p.EngineCoreOutput],
    newest: StepResult,
    engine_index: int,
    utility: p.UtilityOutput | None,
) -> p.EngineOutputs:
    return p.EngineOutputs(
        engine_index=engine_index,
        outputs=list(merged.values()),
        timestamp=newest.timestamp,
        scheduler_stats=newest.scheduler_stats,
        utility_output=utility,
    )


def coalesce(steps: list[StepResult], engine_index: int) -> list[p.EngineOutputs]:
    """The messages that carry ``steps``: as few as the rules in the module doc allow."""
    messages: list[p.EngineOutputs] = []
    merged: dict[str, p.EngineCoreOutput] = {}
    for step in steps:
        for output in step.outputs:
            earlier = merged.get(output.request_id)
            if earlier is None:
                merged[output.request_id] = output
            elif earlier.finish_reason is None:
                _merge(earlier, output)
            else:  # a reused id: keep the two requests apart
                messages.append(_message(merged, step, engine_index, None))
                merged = {output.request_id: output}
        if step.utility_output is not None:
            messages.append(_message(merged, step, engine_index, step.utility_output))
            merged = {}
    if merged:
        messages.append(_message(merged, steps[-1], engine_index, None))
    return messages
