"""What may go with ``use_beam_search``: the fields a beam search cannot honour are a 400
naming the field. Mirrors ``rust/server/src/validate/beam_search.rs``, check for check, in
the same order. The search itself: :mod:`server.output.beam_search`. Behaviour:
docs/api.md, "Beam search".

A search step asks the engine for the top ``2 × n`` log-probabilities of each beam's next
token, the model's raw ones: so ``n`` is at most half the engine's logprobs cap, and what
reshapes the distribution (penalties, biases, masks, grammars) or the output (stop strings
and tokens, ``min_tokens``, logprobs) cannot apply. ``temperature``, ``top_p``, ``top_k``,
``min_p`` pick a sampled token, which a search has none of: they are accepted and change
nothing, as in vLLM (``seed`` seeds the steps: :mod:`server.output.beam_search`).
"""

from __future__ import annotations

from server.edge.error import bad_request
from server.validate.params import MAX_LOGPROBS, Settings

# The widest search: each step asks for 2 × width logprobs, at most the engine's cap.
MAX_WIDTH = MAX_LOGPROBS // 2
RENDER_REFUSAL = "Beam search is not supported by the render endpoint"
PARAM = "use_beam_search"


def _refused(field: str) -> None:
    raise bad_request(f"`{field}` is not supported with beam search", field)


def check(settings: Settings, chat: bool) -> None:
    """Refuses what cannot go with the search ``settings`` asks for (none: nothing to
    check). Runs after every field's own check (chat: after ``logprobs``; completions:
    after ``logprobs`` and ``echo``), before the model."""
    beam = settings.beam_search
    if beam is None:
        return
    if not chat and settings.stream:
        raise bad_request("Streaming is not currently supported with beam search", "stream")
    if beam.width > MAX_WIDTH:
        raise bad_request(
            f"`n` must be in [1, {MAX_WIDTH}] with beam search (each step asks the engine for "
            f"the top 2 × n log-probabilities, at most {MAX_LOGPROBS}), got {beam.width}", "n")
    if settings.echo_only:
        raise bad_request(f"`{settings.max_tokens_field}` must be at least 1 with beam search",
                          settings.max_tokens_field)
    sampling = settings.sampling
    if sampling.logprobs is not None:
        _refused("logprobs")
    if settings.prompt_logprobs is not None:
        _refused("prompt_logprobs")
    if settings.stop:
        _refused("stop")
    if sampling.stop_token_ids:
        _refused("stop_token_ids")
    if sampling.min_tokens > 0:
        _refused("min_tokens")
    if sampling.presence_penalty != 0.0:
        _refused("presence_penalty")
    if sampling.frequency_penalty != 0.0:
        _refused("frequency_penalty")
    if sampling.repetition_penalty != 1.0:
        _refused("repetition_penalty")
    if sampling.logit_bias:
        _refused("logit_bias")
    if sampling.allowed_token_ids is not None:
        _refused("allowed_token_ids")
    if settings.bad_words:
        _refused("bad_words")
    if settings.constraint is not None:
        _refused(settings.constraint)


def check_tools(settings: Settings, forcing: str | None) -> None:
    """A ``tool_choice`` that forces a call (``forcing``: how the messages name it) needs
    a grammar and a stop string: refused with beam search."""
    if settings.beam_search is not None and forcing is not None:
        raise bad_request(f"`tool_choice` {forcing} is not supported with beam search",
                          "tool_choice")


def check_render(settings: Settings) -> None:
    """The render service answers what one engine request would get: a search is many
    (vLLM's render endpoint refuses it too)."""
    if settings.beam_search is not None:
        raise bad_request(RENDER_REFUSAL, PARAM)
