"""The sampling fields vLLM adds to the OpenAI ones: ``logit_bias``, ``allowed_token_ids``,
``bad_words`` (tokenized here) and ``prompt_logprobs``, checked (a 400 naming the field) and
lowered for the engine. Mirrors ``rust/server/src/validate/sampling.rs``.
Behaviour: docs/api.md, "Chat and completions request fields".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from engine import protocol as p
from server.edge.error import bad_request

MAX_LOGPROBS = 20  # the engine's limit (engine/runtime/sampler.py)
MAX_BIAS = 100.0
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _show(value: float | int) -> str:
    """A number as Rust's Display prints it (``1`` for 1.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def logit_bias(value: Any, vocab_size: int) -> list[tuple[int, float]]:
    """The checked ``logit_bias`` as (token id, bias) pairs, sorted by token id."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise bad_request(
            "`logit_bias` must be an object mapping token ids (as strings) to biases", "logit_bias"
        )
    pairs = []
    for key, bias in value.items():
        if _INTEGER.fullmatch(key) is None:
            raise bad_request(
                f'`logit_bias` key "{key}" is not a token id (an integer)', "logit_bias"
            )
        token = int(key)
        if not 0 <= token < vocab_size:
            raise bad_request(
                f'`logit_bias` key "{key}" is out of the vocabulary (size {vocab_size})',
                "logit_bias",
            )
        if not _is_number(bias):
            raise bad_request(
                f'`logit_bias` value for token "{key}" must be a number', "logit_bias"
            )
        if not -MAX_BIAS <= bias <= MAX_BIAS:
            raise bad_request(
                f'`logit_bias` value for token "{key}" must be in [-100, 100], got {_show(bias)}',
                "logit_bias",
            )
        pairs.append((token, float(bias)))
    pairs.sort(key=lambda pair: pair[0])
    return pairs


def allowed_token_ids(value: Any, vocab_size: int) -> list[int] | None:
    """The checked ``allowed_token_ids`` (None: any token)."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(type(t) is int for t in value):
        raise bad_request(
            "`allowed_token_ids` must be a non-empty list of token ids", "allowed_token_ids"
        )
    for token in value:
        if not 0 <= token < vocab_size:
            raise bad_request(
                f"token id {token} in `allowed_token_ids` is out of the "
                f"vocabulary (size {vocab_size})",
                "allowed_token_ids",
            )
    return list(value)


def bad_words(value: Any) -> list[str]:
    """The checked ``bad_words`` (tokenized later, with :func:`bad_words_ids`)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise bad_request("`bad_words` must be a list of strings", "bad_words")
    return list(value)


def bad_words_ids(words: list[str], encode: Callable[[str], list[int]]) -> list[list[int]]:
    """The id sequences of ``words`` (``encode`` without special tokens): each word's
    ``lstrip()`` and ``" " + lstrip()``, non-empty and distinct, in order."""
    out: list[list[int]] = []
    for word in words:
        stripped = word.lstrip()
        for variant in (stripped, " " + stripped):
            ids = encode(variant)
            if ids and ids not in out:
                out.append(ids)
    return out


def prompt_logprobs(value: int | None) -> int | None:
    if value is not None and not 0 <= value <= MAX_LOGPROBS:
        raise bad_request(
            f"`prompt_logprobs` must be in [0, {MAX_LOGPROBS}], got {value}", "prompt_logprobs"
        )
    return value


def apply(request: Any, sampling: p.SamplingParams, vocab_size: int) -> list[str]:
    """``logit_bias``, ``allowed_token_ids`` and ``prompt_logprobs`` of ``request`` into
    ``sampling``; returns the ``bad_words`` to tokenize."""
    sampling.logit_bias = logit_bias(request.logit_bias, vocab_size)
    sampling.allowed_token_ids = allowed_token_ids(request.allowed_token_ids, vocab_size)
    sampling.prompt_logprobs = prompt_logprobs(request.prompt_logprobs)
    return bad_words(request.bad_words)
