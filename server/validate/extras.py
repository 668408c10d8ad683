"""vLLM's request extensions of chat and completions that shape the prompt and how the
answer is shown: ``truncate_prompt_tokens`` / ``truncation_side``, chat's
``reasoning_effort``, ``include_reasoning`` and ``separate_reasoning``,
``return_token_ids`` and ``return_tokens_as_token_ids``; and the alias
``messages[].reasoning`` of ``reasoning_content``. Checked after the sampling and
structured-output fields, before the model. Mirrors ``rust/server/src/validate/extras.rs``.
Behaviour: docs/api.md, "vLLM's request extensions".
"""

from __future__ import annotations

from typing import Any

import msgspec

from server import openai as s
from server.edge.error import bad_request

# vLLM 0.33's ReasoningEffort.
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
TRUNCATION_SIDES = ("left", "right")


class Extras(msgspec.Struct):
    """A request's checked extensions (the defaults: none asked for)."""

    token_ids: bool = False  # return_token_ids
    ids_as_tokens: bool = False  # return_tokens_as_token_ids: logprobs name `token_id:N`
    truncate: int | None = None  # keep at most this many prompt tokens (-1 resolved)
    truncate_left: bool = False  # ... the last ones (else the first)
    reasoning_effort: str | None = None
    include_reasoning: bool = True
    separate_reasoning: bool = True


def check(request: s.ChatCompletionRequest | s.CompletionRequest, max_model_len: int,
          left_by_default: bool) -> Extras:
    """The extensions of ``request`` checked; ``left_by_default``: the tokenizer
    truncates on the left (its ``truncation_side``), where ``truncation_side`` is unset."""
    extras = Extras(token_ids=bool(request.return_token_ids),
                    ids_as_tokens=bool(request.return_tokens_as_token_ids))
    truncate = request.truncate_prompt_tokens
    if truncate is not None:
        if truncate < -1:
            raise bad_request("`truncate_prompt_tokens` must be -1 (the context length less "
                              f"one) or at least 0, got {truncate}", "truncate_prompt_tokens")
        if truncate > max_model_len:
            raise bad_request(f"`truncate_prompt_tokens` {truncate} cannot be greater than "
                              f"max_model_len = {max_model_len}; request a smaller truncation "
                              "size", "truncate_prompt_tokens")
        extras.truncate = max_model_len - 1 if truncate == -1 else truncate
    side = request.truncation_side
    if side is not None and side not in TRUNCATION_SIDES:
        raise bad_request(f"`truncation_side` must be `left` or `right`, got `{side}`",
                          "truncation_side")
    extras.truncate_left = left_by_default if side is None else side == "left"
    if isinstance(request, s.ChatCompletionRequest):
        effort = request.reasoning_effort
        if effort is not None and effort not in REASONING_EFFORTS:
            listed = ", ".join(f"`{e}`" for e in REASONING_EFFORTS)
            raise bad_request(f"`reasoning_effort` must be one of {listed}, got `{effort}`",
                              "reasoning_effort")
        extras.reasoning_effort = effort
        extras.include_reasoning = request.include_reasoning is not False
        extras.separate_reasoning = request.separate_reasoning is not False
    return extras


def template_kwargs(user: dict[str, Any] | None, effort: str | None) -> dict[str, Any]:
    """The chat template's kwargs: the request's ``chat_template_kwargs`` with vLLM's
    ``reasoning_effort`` rule: the effort as ``reasoning_effort`` (over the kwargs' own),
    and ``enable_thinking`` = effort is not ``none`` unless the kwargs name
    ``enable_thinking``."""
    kwargs = dict(user or {})
    if effort is not None:
        kwargs["reasoning_effort"] = effort
        if "enable_thinking" not in (user or {}):
            kwargs["enable_thinking"] = effort != "none"
    return kwargs


def truncated(ids: list[int], extras: Extras) -> list[int] | None:
    """The prompt ``ids`` cut to ``truncate_prompt_tokens``; None when nothing is cut."""
    keep = extras.truncate
    if keep is None or keep >= len(ids):
        return None
    if keep == 0:
        return []
    return ids[-keep:] if extras.truncate_left else ids[:keep]


def message_reasoning(message: s.ChatMessage) -> str | None:
    """An assistant message's reasoning: ``reasoning`` (vLLM's name), else
    ``reasoning_content``; None for other roles (vLLM gives the template none)."""
    if message.role != "assistant":
        return None
    return message.reasoning if message.reasoning is not None else message.reasoning_content
