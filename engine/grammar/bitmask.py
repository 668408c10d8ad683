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

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported where it is used: the mock engine never needs it
    import torch

_BATCH_FILLER: Any = None


class Grammar:
    """A compiled grammar, and the tokens banned on top of it: None, or bitmask words
    (xgrammar's layout) whose bits are cleared for the banned tokens."""

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
        self.banned = grammar.banned  # ban words, or None

    def accept_token(self, token: int) -> bool:
        return bool(self.xgr.accept_token(token))

    def is_terminated(self) -> bool:
        return bool(self.xgr.is_terminated())

    def bans(self, token: int) -> bool:
        if self.banned is None:
            return False
        return not (int(self.banned[token // 32]) >> (token % 32)) & 1


def control_ban(decoded_vocab: list[bytes], vocab_size: int) -> torch.Tensor:
    """Ban words (see Grammar) clearing the tokens whose bytes hold a control character."""
    import torch

    table = bytes(range(32))
    bits = np.ones(-(-vocab_size // 32) * 32, dtype=np.uint8)
    for i, piece in enumerate(decoded_vocab[:vocab_size]):
        if piece != piece.translate(None, table):
            bits[i] = 0
    words = np.packbits(bits, bitorder="little").view(np.int32)
    return torch.from_numpy(words.copy())


def _filler() -> Any:
    global _BATCH_FILLER
    if _BATCH_FILLER is None:
        import xgrammar as xgr

        _BATCH_FILLER = xgr.BatchGrammarMatcher(max_threads=2)
    return _BATCH_FILLER


def apply_grammars(logits: torch.Tensor, rows: list[int], matchers: list[Matcher]) -> None:
    """Mask ``logits[rows[i]]`` to what ``matchers[i]`` allows (float32, in place), and the
    grammars' banned tokens too, except in a row the ban would leave empty (a grammar that
    requires a control character keeps it)."""
    import torch
    import xgrammar as xgr

    vocab = logits.shape[1]
    bitmask = xgr.allocate_token_bitmask(logits.shape[0], vocab)
    _filler().batch_fill_next_token_bitmask([m.xgr for m in matchers], bitmask, indices=rows)
    bans: dict[int, tuple[torch.Tensor, list[int]]] = {}
    for row, matcher in zip(rows, matchers, strict=True):
        if matcher.banned is not None:
            bans.setdefault(id(matcher.banned), (matcher.banned, []))[1].append(row)
    for words, banned_rows in bans.values():  # one AND per ban (all JSON rows share one)
        index = torch.tensor(banned_rows, dtype=torch.long)
        kept = bitmask[index] & words
        nonempty = kept.ne(0).any(dim=1)
        bitmask[index[nonempty]] = kept[nonempty]
    if logits.device.type == "cpu":
        _mask_on_cpu(logits, bitmask, rows)
    else:
        bitmask = bitmask.to(logits.device, non_blocking=True)
        xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab, indices=rows)


def _mask_on_cpu(logits: torch.Tensor, bitmask: torch.Tensor, rows: list[int]) -> None:
    """``-inf`` where a row's bit is clear. xgrammar's CPU kernel sets them one by one
    (47 ms for 64 rows of a 129k vocabulary here); unpacking the cleared bits with numpy and
    one masked fill takes 7."""
    import torch

    vocab = logits.shape[1]
    everyone = len(rows) == logits.shape[0]  # rows ascend, so these are all of them
    words = bitmask if everyone else bitmask[rows]
    cleared = np.unpackbits((~words).numpy().view(np.uint8), axis=1, bitorder="little")
    disallowed = torch.from_numpy(cleared[:, :vocab]).view(torch.bool)
    if everyone:
        logits.masked_fill_(disallowed, float("-inf"))
    else:
        index = torch.tensor(rows, dtype=torch.long)
        logits[index] = logits[index].masked_fill_(disallowed, float("-inf"))


def allowed_token_ids(matcher: Matcher, vocab_size: int) -> np.ndarray:
    """The token ids ``matcher`` allows next, ascending (bans applied)."""
    import xgrammar as xgr

    bitmask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.xgr.fill_next_token_bitmask(bitmask, 0)
    if matcher.banned is not None and bool((bitmask[0] & matcher.banned).ne(0).any()):
        bitmask[0] &= matcher.banned
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)
