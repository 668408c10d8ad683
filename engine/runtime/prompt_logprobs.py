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
from engine.runtime.logprobs import token_logprobs
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
            entries.extend(token_logprobs(torch.log_softmax(logits, dim=-1), targets, k))
        results.append((request, entries))
        row += span.count
    return results
