"""The candidates of a top-k / top-p draw, without sorting the whole vocabulary.

Rows that set ``top_k`` take ``torch.topk`` of their ``k`` best logits; ``top_p`` then
keeps the smallest prefix of those (best first) whose probability reaches ``top_p``,
probabilities renormalised within the top ``k`` (top-k first, then top-p, as
transformers and vLLM apply them). Rows with ``top_p`` alone measure the mass against the
full distribution (its log-normaliser is one pass over the vocabulary) and take the best
``width`` logits, ``width`` growing until each such row's prefix reaches its ``top_p``.
A peaked distribution needs a few hundred candidates, a flat one up to all of them: the
next width is at least what the mass still missing needs at the current smallest
probability, and past half the vocabulary it is the whole of it (one sort).

``Candidates`` holds, per row, the logits and token ids best first and how many of them
are kept (a prefix); the draw happens over that prefix only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

FIRST_WIDTH = 256  # candidates first taken for a row with top_p alone


@dataclass
class Candidates:
    logits: torch.Tensor  # [rows, width] best first; -inf past each row's kept prefix
    token_ids: torch.Tensor  # [rows, width] the vocabulary ids of those logits
    kept: list[int]  # per row, the length of its kept prefix


def top_k_top_p(logits: torch.Tensor, top_k: list[int], top_p: list[float]) -> Candidates:
    """The kept candidates of each row of ``logits [rows, vocab]`` (already divided by the
    temperature). ``top_k`` entries outside ``1..vocab-1`` and ``top_p`` entries of 1 or
    more mean no limit; every row has at least its best token."""
    rows, vocab = logits.shape
    dev = logits.device
    k = torch.tensor([v if 0 < v < vocab else vocab for v in top_k], device=dev)
    has_k = k < vocab
    tp = torch.tensor([v if v < 1.0 else 2.0 for v in top_p], device=dev, dtype=logits.dtype)
    p_only = (~has_k) & (tp <= 1.0)
    width = int(k[has_k].max()) if bool(has_k.any()) else 1
    log_norm = torch.zeros(rows, device=dev, dtype=logits.dtype)
    if bool(p_only.any()):
        width = max(width, FIRST_WIDTH)
        log_norm = torch.where(p_only, torch.logsumexp(logits, dim=-1), log_norm)
    while True:
        width = min(width, vocab)
        values, ids = logits.topk(width, dim=-1) if width < vocab else logits.sort(
            dim=-1, descending=True)
        rank = torch.arange(width, device=dev)[None, :]
        drop = rank >= k[:, None]
        masked = values.masked_fill(drop, float("-inf"))
        # Top-k rows: renormalised within their k; top-p-only rows: against the vocabulary.
        norm = torch.where(p_only, log_norm, torch.logsumexp(masked, dim=-1))
        probs = torch.exp(masked - norm[:, None])
        mass = probs.cumsum(dim=-1)
        short = p_only & (mass[:, -1] < tp)
        if width == vocab or not bool(short.any()):
            break
        # Each missing unit of mass needs at least 1 / (the smallest candidate's
        # probability) more tokens.
        smallest = probs[short, -1].clamp_min(1e-30)
        missing = (tp[short] - mass[short, -1]) / smallest
        grown = width + int(missing.max().clamp_max(vocab))
        width = vocab if grown > vocab // 2 else max(2 * width, grown)
    # Drop a token once the tokens ranked above it already reach top_p.
    drop |= (mass - probs) >= tp[:, None]
    drop[:, 0] = False
    kept = (~drop).sum(dim=-1).tolist()
    return Candidates(values.masked_fill(drop, float("-inf")), ids, kept)
