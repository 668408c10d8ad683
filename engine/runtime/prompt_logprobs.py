"""Prompt logprobs: the log-probability of each prompt token given the tokens before it.

Only requests with ``prompt_logprobs`` set pay for them. While such a request's prompt
is prefilled, the model runner turns the hidden states of the chunk's prompt positions
into logits too (not only the last position's); here each position ``i`` becomes one
``TokenLogprobs`` describing prompt token ``i + 1``: its logprob, its 1-based rank and
the top-k of the position. Values come from the model's raw logits, upcast to float32,
through ``log_softmax`` (no temperature, penalties, bias or masks): what evaluation needs.

Logits of a long chunk are ``rows x vocab`` floats, so they are made ``ROWS_PER_SLICE``
rows at a time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from engine import protocol as p
from engine.runtime.request import Request

ROWS_PER_SLICE = 256


@dataclass
class PromptSpan:
    """``count`` prompt positions of ``request`` from ``first``, in this step's rows."""

    request: Request
    first: int
    count: int


def compute_prompt_logprobs(
    logits_of: Callable[[torch.Tensor], torch.Tensor],
    hidden: torch.Tensor,
    spans: list[PromptSpan],
) -> list[tuple[Request, list[p.TokenLogprobs]]]:
    """The entries of every span; ``hidden`` holds the spans' rows, in span order."""
    results: list[tuple[Request, list[p.TokenLogprobs]]] = []
    row = 0
    for span in spans:
        request = span.request
        k = request.params.prompt_logprobs or 0
        entries: list[p.TokenLogprobs] = []
        for lo in range(0, span.count, ROWS_PER_SLICE):
            n = min(ROWS_PER_SLICE, span.count - lo)
            first = span.first + lo
            targets = request.token_ids[first + 1 : first + 1 + n]
            logits = logits_of(hidden[row + lo : row + lo + n]).float()
            entries.extend(_entries(torch.log_softmax(logits, dim=-1), targets, k))
        results.append((request, entries))
        row += span.count
    return results


def _entries(logprobs: torch.Tensor, targets: list[int], k: int) -> list[p.TokenLogprobs]:
    target = torch.tensor(targets, dtype=torch.long, device=logprobs.device)[:, None]
    values = logprobs.gather(1, target)
    ranks = ((logprobs > values).sum(dim=1) + 1).tolist()
    values_list = values[:, 0].tolist()
    k = min(k, logprobs.shape[1])
    if k == 1:  # a max is cheaper than a top-k of one
        best = logprobs.max(dim=1, keepdim=True)
        top_ids, top_vals = best.indices.tolist(), best.values.tolist()
    elif k > 1:
        top = torch.topk(logprobs, k, dim=1)
        top_ids, top_vals = top.indices.tolist(), top.values.tolist()
    else:
        top_ids = [[] for _ in targets]
        top_vals = [[] for _ in targets]
    return [
        p.TokenLogprobs(
            token_id=token, logprob=value, rank=rank, top_token_ids=ids, top_logprobs=vals
        )
        for token, value, rank, ids, vals in zip(
            targets, values_list, ranks, top_ids, top_vals, strict=True
        )
    ]
