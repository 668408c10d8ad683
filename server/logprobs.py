"""Log-probabilities in the OpenAI shapes, from the engine's ``TokenLogprobs``.

Mirrors ``rust/server/src/logprobs.rs``. A token's text is its id decoded alone with
special tokens kept (an incomplete UTF-8 sequence decodes to U+FFFD); ``bytes`` are that
text's UTF-8 bytes. Log-probabilities below -9999 (or not finite) are reported as -9999,
as vLLM does, so the JSON stays valid.

* chat: ``{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token",
  "logprob", "bytes"}, ...]}, ...]}`` with ``top_logprobs`` entries per token;
* completions: ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}`` where
  ``top_logprobs`` maps each of the top ``logprobs`` token texts to its logprob (a text
  seen twice keeps its first, larger value) and ``text_offset`` counts characters from
  the start of the choice's text (after the echoed prompt, when echoing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import msgspec
import tokenizers

from engine import protocol as p

FLOOR = -9999.0
MAX_LOGPROBS = 20  # the engine's limit (engine/runtime/sampler.py)


def clamp(value: float) -> float:
    return value if math.isfinite(value) and value > FLOOR else FLOOR


class TopLogprob(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int]


class TokenLogprob(msgspec.Struct):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[TopLogprob]


class ChatLogprobs(msgspec.Struct):
    content: list[TokenLogprob]


class CompletionLogprobs(msgspec.Struct):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]


class TokenTexts:
    """Token id -> its text alone (cached)."""

    def __init__(self, backend: tokenizers.Tokenizer) -> None:
        @lru_cache(maxsize=65536)
        def text(token_id: int) -> str:
            return backend.decode([token_id], skip_special_tokens=False)

        self.text = text

    def chat(self, entries: Sequence[p.TokenLogprobs], top: int) -> list[TokenLogprob]:
        text = self.text
        out = []
        for entry in entries:
            token = text(entry.token_id)
            tops = [TopLogprob(t := text(tid), clamp(lp), list(t.encode()))
                    for tid, lp in zip(entry.top_token_ids[:top], entry.top_logprobs[:top],
                                       strict=False)]
            out.append(TokenLogprob(token, clamp(entry.logprob), list(token.encode()), tops))
        return out

    def completion(self, entries: Sequence[p.TokenLogprobs], top: int,
                   offset: int) -> tuple[CompletionLogprobs, int]:
        """The logprobs of ``entries`` whose text starts at ``offset``; and the offset
        after them."""
        text = self.text
        result = CompletionLogprobs([], [], [], [])
        for entry in entries:
            token = text(entry.token_id)
            result.tokens.append(token)
            result.token_logprobs.append(clamp(entry.logprob))
            tops: dict[str, float] = {}
            for tid, lp in zip(entry.top_token_ids[:top], entry.top_logprobs[:top],
                               strict=False):
                tops.setdefault(text(tid), clamp(lp))
            result.top_logprobs.append(tops)
            result.text_offset.append(offset)
            offset += len(token)
        return result, offset


def extend(whole: CompletionLogprobs, part: CompletionLogprobs) -> None:
    whole.tokens += part.tokens
    whole.token_logprobs += part.token_logprobs
    whole.top_logprobs += part.top_logprobs
    whole.text_offset += part.text_offset
