"""Token bitmasks: what each constrained request may generate next.

``apply_grammars`` fills one bitmask row per constrained request (all rows in one batched
call, on xgrammar's threads) and sets every other token's logit to ``-inf``, in place.
``allowed_token_ids`` is the mock engine's view of the same mask.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

_BATCH_FILLER: Any = None


def new_matcher(compiled: Any) -> Any:
    """A fresh matcher for one request (the grammar's start state)."""
    import xgrammar as xgr

    return xgr.GrammarMatcher(compiled)


def _filler() -> Any:
    global _BATCH_FILLER
    if _BATCH_FILLER is None:
        import xgrammar as xgr

        _BATCH_FILLER = xgr.BatchGrammarMatcher(max_threads=2)
    return _BATCH_FILLER


def apply_grammars(logits: torch.Tensor, rows: list[int], matchers: list[Any]) -> None:
    """Mask ``logits[rows[i]]`` to what ``matchers[i]`` allows (float32, in place)."""
    import xgrammar as xgr

    vocab = logits.shape[1]
    bitmask = xgr.allocate_token_bitmask(logits.shape[0], vocab)
    _filler().batch_fill_next_token_bitmask(matchers, bitmask, indices=rows)
    if logits.device.type == "cpu":
        xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab, indices=rows)
    else:
        xgr.apply_token_bitmask_inplace(
            logits, bitmask.to(logits.device, non_blocking=True), vocab_size=vocab, indices=rows
        )


def allowed_token_ids(matcher: Any, vocab_size: int) -> np.ndarray:
    """The token ids ``matcher`` allows next, ascending."""
    import xgrammar as xgr

    bitmask = xgr.allocate_token_bitmask(1, vocab_size)
    matcher.fill_next_token_bitmask(bitmask, 0)
    bits = np.unpackbits(bitmask.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return np.flatnonzero(bits)
