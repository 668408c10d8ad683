"""Log-probability entries (``TokenLogprobs``) from rows of log-probabilities: the one
computation behind sampled-token logprobs (the sampler) and prompt logprobs."""

from __future__ import annotations

import torch

from engine import protocol as p


def token_logprobs(
    logprobs: torch.Tensor, targets: list[int], k: int | list[int]
) -> list[p.TokenLogprobs]:
    """One entry per row of ``logprobs`` (``rows x vocab``, already ``log_softmax``-ed):
    the row's target token with its logprob and 1-based rank, and the row's top ``k``
    (one ``k`` for all rows, or one per row: a single top-k of the largest serves all)."""
    rows, vocab = logprobs.shape
    ks = [min(k, vocab)] * rows if isinstance(k, int) else [min(v, vocab) for v in k]
    target = torch.tensor(targets, dtype=torch.long, device=logprobs.device)[:, None]
    values = logprobs.gather(1, target)
    # An int32 count: torch sums a wide bool tensor's rows into int64 ~8x slower.
    ranks = ((logprobs > values).sum(dim=1, dtype=torch.int32) + 1).tolist()
    values_list = values[:, 0].tolist()
    widest = max(ks, default=0)
    if widest == 1:  # a max is cheaper than a top-k of one
        best = logprobs.max(dim=1, keepdim=True)
        top_ids, top_vals = best.indices.tolist(), best.values.tolist()
    elif widest > 1:
        top = torch.topk(logprobs, widest, dim=1)
        top_ids, top_vals = top.indices.tolist(), top.values.tolist()
    else:
        top_ids = [[] for _ in targets]
        top_vals = [[] for _ in targets]
    return [
        p.TokenLogprobs(
            token_id=token, logprob=value, rank=rank, top_token_ids=ids[:n],
            top_logprobs=vals[:n],
        )
        for token, value, rank, ids, vals, n in zip(
            targets, values_list, ranks, top_ids, top_vals, ks, strict=True
        )
    ]
