"""Log-probabilities in the OpenAI shapes, from the engine's ``TokenLogprobs``: chat's and
completions' ``logprobs``, an echoed prompt's logprobs and vLLM's ``prompt_logprobs``
(:class:`TokenTexts`, which decodes each token id alone once). Mirrors
``rust/server/src/logprobs.rs``. Behaviour: docs/api.md, "Responses", "Prompt logprobs and
echo".
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
    token_logprobs: list[float | None]  # None: the first token of an echoed prompt
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class PromptLogprob(msgspec.Struct):
    logprob: float
    rank: int
    decoded_token: str


# vLLM's prompt_logprobs: None for the first prompt token, then token id (a string) ->
# its logprob, rank and text.
PromptLogprobs = list[dict[str, PromptLogprob] | None]


def token_id_name(token_id: int) -> str:
    """A token as ``return_tokens_as_token_ids`` names it (vLLM's placeholder)."""
    return f"token_id:{token_id}"


class TokenTexts:
    """Token id -> its text alone (cached). ``as_ids`` (``return_tokens_as_token_ids``):
    logprobs name each token ``token_id:N`` instead (its texts, top keys and offsets);
    a chat token's own ``bytes`` stay its text's, as vLLM's."""

    def __init__(self, backend: tokenizers.Tokenizer) -> None:
        @lru_cache(maxsize=65536)
        def text(token_id: int) -> str:
            return backend.decode([token_id], skip_special_tokens=False)

        self.text = text

    def chat(self, entries: Sequence[p.TokenLogprobs], top: int,
             as_ids: bool = False) -> list[TokenLogprob]:
        text = self.text
        name = token_id_name if as_ids else text
        out = []
        for entry in entries:
            tops = [TopLogprob(t := name(tid), clamp(lp), list(t.encode()))
                    for tid, lp in zip(entry.top_token_ids[:top], entry.top_logprobs[:top],
                                       strict=False)]
            out.append(TokenLogprob(name(entry.token_id), clamp(entry.logprob),
                                    list(text(entry.token_id).encode()), tops))
        return out

    def completion(self, entries: Sequence[p.TokenLogprobs], top: int, offset: int,
                   with_token: bool = False,
                   as_ids: bool = False) -> tuple[CompletionLogprobs, int]:
        """The logprobs of ``entries`` whose text starts at ``offset``; and the offset
        after them. ``with_token``: each entry's own token leads its top logprobs."""
        text = token_id_name if as_ids else self.text
        result = CompletionLogprobs([], [], [], [])
        for entry in entries:
            token = text(entry.token_id)
            result.tokens.append(token)
            result.token_logprobs.append(clamp(entry.logprob))
            # vLLM's order: the token itself first (echoed prompt tokens), then the top k
            tops: dict[str, float] = {token: clamp(entry.logprob)} if with_token else {}
            for tid, lp in zip(entry.top_token_ids[:top], entry.top_logprobs[:top],
                               strict=False):
                tops.setdefault(text(tid), clamp(lp))
            result.top_logprobs.append(tops)
            result.text_offset.append(offset)
            offset += len(token)
        return result, offset

    def echo(self, prompt_ids: Sequence[int], entries: Sequence[p.TokenLogprobs],
             top: int, as_ids: bool = False) -> tuple[CompletionLogprobs, int]:
        """The echoed prompt's part of a completion's logprobs (offsets from 0); and the
        offset after it."""
        first = token_id_name(prompt_ids[0]) if as_ids else self.text(prompt_ids[0])
        rest, offset = self.completion(entries, top, len(first), with_token=True,
                                       as_ids=as_ids)
        head = CompletionLogprobs([first], [None], [None], [0])
        extend(head, rest)
        return head, offset

    def prompt(self, entries: Sequence[p.TokenLogprobs], top: int) -> PromptLogprobs:
        """vLLM's ``prompt_logprobs`` of a prompt from its engine entries."""
        text = self.text
        out: PromptLogprobs = [None]
        for entry in entries:
            actual = str(entry.token_id)
            position = {actual: PromptLogprob(clamp(entry.logprob), entry.rank,
                                              text(entry.token_id))}
            for rank, (tid, lp) in enumerate(zip(entry.top_token_ids[:top],
                                                 entry.top_logprobs[:top], strict=False),
                                             start=1):
                position.setdefault(str(tid), PromptLogprob(clamp(lp), rank, text(tid)))
            out.append(position)
        return out


def extend(whole: CompletionLogprobs, part: CompletionLogprobs) -> None:
    whole.tokens += part.tokens
    whole.token_logprobs += part.token_logprobs
    whole.top_logprobs += part.top_logprobs
    whole.text_offset += part.text_offset
