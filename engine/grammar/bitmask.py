"""Token bitmasks: what each constrained request may generate next.

``apply_grammars`` fills one bitmask row per constrained request (all rows in one batched
call, on xgrammar's threads) and sets every other token's logit to ``-inf``, in place.
``allowed_token_ids`` is the mock engine's view of the same mask.

JSON grammars also ban every token holding a control character (bytes below 0x20): no
compact JSON text contains one raw (inside strings they must be escaped, and the only
whitespace between tokens is a space), but xgrammar's strings with ``maxLength`` let them
through (found by tests/e2e/test_structured_outputs.py: ``"ab\\x00"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

_BATCH_FILLER: Any = None


class Grammar:
    """A compiled grammar, and the tokens banned on top of it (None: none)."""

    __slots__ = ("compiled", "banned")

    def __init__(self, compiled: Any, banned: torch.Tensor | None) -> None:
        self.compiled = compiled
        self.banned = banned


class Matcher:
    """One request's place in its grammar: it has accepted every output token so far."""

    __slots__ = ("xgr", "banned")

    def __init__(self, grammar: Grammar) -> None:
        import xgrammar as xgr

        self.xgr = xgr.GrammarMatcher(grammar.compiled)
        self.banned = grammar.banned

    def accept_token(self, token: int) -> bool:
        return bool(self.xgr.accept_token(token))

    def is_terminated(self) -> bool:
        return bool(self.xgr.is_terminated())

    def bans(self, token: int) -> bool:
        return self.banned is not None and bool((self.banned == token).any())


def control_token_ids(decoded_vocab: list[bytes]) -> torch.Tensor:
    """The ids of the tokens whose bytes hold a control character."""
    table = bytes(range(32))
    ids = [i for i, piece in enumerate(decoded_vocab) if piece != piece.translate(None, table)]
    return torch.tensor(ids, dtype=torch.long)


def _filler() -> Any:
    global _BATCH_FILLER
    if _BATCH_FILLER is None:
        import xgrammar as xgr

        _BATCH_FILLER = xgr.BatchGrammarMatcher(max_threads=2)
    return _BATCH_FILLER


def apply_grammars(
    logits: torch.Tensor, rows: list[int], matchers: list[Matcher], with_bans: bool = True
) -> None:
    """Mask ``logits[rows[i]]`` to what ``matchers[i]`` allows (float32, in place); with
    ``with_bans``, the grammars' banned tokens too."""
    import xgrammar as xgr

    vocab = logits.shape[1]
    bitmask = xgr.allocate_token_bitmask(logits.shape[0], vocab)
    _filler().batch_fill_next_token_bitmask([m.xgr for m in matchers], bitmask, indices=rows)
    if logits.device.type != "cpu":
        bitmask = bitmask.to(logits.device, non_blocking=True)
    xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab, indices=rows)
    if with_bans:
        for row, matcher in zip(rows, matchers, strict=True):
            if matcher.banned is not None:
                logits[row, matcher.banned.to(logits.device)] = float("-inf")


def allowed_token_ids(matcher: Matcher, vocab_size: int) -> np.ndarray:
    """The token ids ``matcher`` allows next, ascending (bans applied)."""
    import xgrammar as xgr

    bitmask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.xgr.fill_next_token_bitmask(bitmask, 0)
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    if matcher.banned is not None:
        bits[matcher.banned.numpy()] = 0
    return np.flatnonzero(bits)
