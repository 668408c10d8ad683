"""Why a request can never be served by this engine, with the numbers (or None).

The frontends validate first and answer 400; this is the engine's own guard, so that a
bad request from any client ends as ``finish_reason="error"`` instead of breaking a step.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from engine import protocol as p
from engine.runtime.kv_cache import cdiv
from engine.runtime.sampler import MAX_LOGPROBS
from engine.thinking_budget import budget_error

if TYPE_CHECKING:
    from engine.runtime.pooling.decoder_pooler import DecoderPooler


def prompt_error(prompt: list[int], vocab_size: int) -> str | None:
    """Why ``prompt`` cannot be run: empty, or a token id outside the vocabulary."""
    if not prompt:
        return "the prompt is empty"
    low, high = min(prompt), max(prompt)
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        return f"prompt token id {bad} is out of range 0..{vocab_size - 1}"
    return None


def pooling_request_error(
    request: p.EngineCoreRequest,
    pooler: DecoderPooler | None,
    vocab_size: int,
    max_model_len: int,
    block_size: int,
    num_blocks: int,
) -> str | None:
    """Why a request to an engine with a pooling head, or a pooling request, cannot be
    served: the runner does not match, the prompt, or the head's own checks."""
    if pooler is None:
        return ("this model is served for generation (--runner generate): pooling "
                "requests (embeddings, classify, score) need a server started with "
                "--runner pooling")
    params = request.pooling_params
    if params is None:
        return ("this model is served for pooling (--runner pooling): it answers "
                "embeddings, classify, score and rerank requests, not generation")
    prompt = request.prompt_token_ids
    error = prompt_error(prompt, vocab_size)
    if error is not None:
        return error
    if len(prompt) > max_model_len:
        return (f"the input has {len(prompt)} tokens, more than this model's maximum "
                f"context length ({max_model_len} tokens)")
    blocks = cdiv(len(prompt), block_size)
    if blocks > num_blocks:
        return (f"the input ({len(prompt)} tokens) needs {blocks} KV blocks of "
                f"{block_size} tokens but the whole cache has {num_blocks}")
    return pooler.request_error(params, len(prompt))


def request_error(
    request: p.EngineCoreRequest,
    vocab_size: int,
    max_model_len: int,
    block_size: int,
    num_blocks: int,
) -> str | None:
    sp = request.sampling_params
    prompt = request.prompt_token_ids
    error = prompt_error(prompt, vocab_size)
    if error is not None:
        return error
    checks = (
        (sp.max_tokens >= 1, "max_tokens", sp.max_tokens, ">= 1"),
        (
            0 <= sp.min_tokens <= sp.max_tokens,
            "min_tokens",
            sp.min_tokens,
            f"0..max_tokens ({sp.max_tokens})",
        ),
        (sp.temperature >= 0.0, "temperature", sp.temperature, ">= 0"),
        (0.0 < sp.top_p <= 1.0, "top_p", sp.top_p, "(0, 1]"),
        (sp.top_k >= 0, "top_k", sp.top_k, ">= 0 (0 = off)"),
        (0.0 <= sp.min_p <= 1.0, "min_p", sp.min_p, "[0, 1]"),
        (sp.repetition_penalty > 0.0, "repetition_penalty", sp.repetition_penalty, "> 0"),
        (-2.0 <= sp.presence_penalty <= 2.0, "presence_penalty", sp.presence_penalty, "[-2, 2]"),
        (-2.0 <= sp.frequency_penalty <= 2.0, "frequency_penalty", sp.frequency_penalty, "[-2, 2]"),
        (
            sp.logprobs is None or 0 <= sp.logprobs <= MAX_LOGPROBS,
            "logprobs",
            sp.logprobs,
            f"0..{MAX_LOGPROBS}",
        ),
        (
            sp.prompt_logprobs is None or 0 <= sp.prompt_logprobs <= MAX_LOGPROBS,
            "prompt_logprobs",
            sp.prompt_logprobs,
            f"0..{MAX_LOGPROBS}",
        ),
    )
    for ok, name, value, allowed in checks:
        if not ok:
            return f"{name}={value!r} is out of range; allowed: {allowed}"
    error = _token_lists_error(sp, vocab_size) or budget_error(sp, vocab_size)
    if error is not None:
        return error
    total = len(prompt) + sp.max_tokens
    if total > max_model_len:
        return (
            f"prompt ({len(prompt)} tokens) + max_tokens ({sp.max_tokens}) = {total} "
            f"exceeds max_model_len ({max_model_len})"
        )
    blocks = cdiv(total - 1, block_size)
    if blocks > num_blocks:
        return (
            f"prompt ({len(prompt)} tokens) + max_tokens ({sp.max_tokens}) needs {blocks} "
            f"KV blocks of {block_size} tokens but the whole cache has {num_blocks}"
        )
    return None


def _token_lists_error(sp: p.SamplingParams, vocab_size: int) -> str | None:
    """logit_bias, allowed_token_ids and bad_words_token_ids: ids in the vocabulary."""
    top = vocab_size - 1

    def out_of_range(token_id: int) -> bool:
        return not 0 <= token_id <= top

    for token_id, bias in sp.logit_bias:
        if out_of_range(token_id):
            return f"logit_bias token id {token_id} is out of range 0..{top}"
        if not math.isfinite(bias):
            return f"logit_bias value {bias!r} for token {token_id} is not a finite number"
    if sp.allowed_token_ids is not None:
        if not sp.allowed_token_ids:
            return "allowed_token_ids is empty; allowed: a non-empty list of token ids"
        bad = [t for t in sp.allowed_token_ids if out_of_range(t)]
        if bad:
            return f"allowed_token_ids token id {bad[0]} is out of range 0..{top}"
    for sequence in sp.bad_words_token_ids:
        if not sequence:
            return "bad_words_token_ids holds an empty sequence"
        bad = [t for t in sequence if out_of_range(t)]
        if bad:
            return f"bad_words_token_ids token id {bad[0]} is out of range 0..{top}"
    return None
