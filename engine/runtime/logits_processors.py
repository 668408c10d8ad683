"""Per-request logits processors: ``allowed_token_ids``, ``logit_bias``, ``bad_words``.

Applied by the sampler to the rows of the requests that set one of them (the others
cost nothing), before penalties, as in vLLM:

* ``allowed_token_ids``: every other token gets ``-inf``;
* ``logit_bias``: each ``(token id, bias)`` pair is added to the token's logit;
* ``bad_words_token_ids``: a sequence's last id gets ``-inf`` when the request's output
  so far ends with the sequence's other ids (a one-token sequence is always banned).
  Only output tokens are matched, never the prompt.

Bans are applied last, so a bias can never lift a banned token back.
"""

from __future__ import annotations

import torch

from engine.runtime.request import Request

NEG_INF = float("-inf")


def apply_logits_processors(logits: torch.Tensor, requests: list[Request], rows: list[int]) -> None:
    """Adjust ``logits[i]`` in place for each ``i`` in ``rows`` (row i is ``requests[i]``)."""
    dev = logits.device
    allowed = [i for i in rows if requests[i].params.allowed_token_ids is not None]
    if allowed:
        banned = torch.ones(len(allowed), logits.shape[1], dtype=torch.bool)
        for j, i in enumerate(allowed):
            banned[j, requests[i].params.allowed_token_ids] = False
        index = torch.tensor(allowed, dtype=torch.long, device=dev)
        logits[index] = logits[index].masked_fill(banned.to(dev), NEG_INF)

    bias_rows: list[int] = []
    bias_ids: list[int] = []
    bias_values: list[float] = []
    ban_rows: list[int] = []
    ban_ids: list[int] = []
    for i in rows:
        request = requests[i]
        sp = request.params
        for token_id, bias in sp.logit_bias:
            bias_rows.append(i)
            bias_ids.append(token_id)
            bias_values.append(bias)
        if sp.bad_words_token_ids:
            for token_id in banned_words(request):
                ban_rows.append(i)
                ban_ids.append(token_id)
    if bias_rows:
        logits.index_put_(
            (torch.tensor(bias_rows, device=dev), torch.tensor(bias_ids, device=dev)),
            torch.tensor(bias_values, dtype=logits.dtype, device=dev),
            accumulate=True,
        )
    if ban_rows:
        logits.index_put_(
            (torch.tensor(ban_rows, device=dev), torch.tensor(ban_ids, device=dev)),
            torch.tensor(NEG_INF, dtype=logits.dtype, device=dev),
        )


def banned_words(request: Request) -> list[int]:
    """The token ids ``request``'s bad words forbid at its next step."""
    tokens = request.token_ids
    num_output = request.num_output_tokens
    banned: list[int] = []
    for sequence in request.params.bad_words_token_ids:
        prefix = len(sequence) - 1
        if prefix == 0 or (num_output >= prefix and tokens[-prefix:] == sequence[:-1]):
            banned.append(sequence[-1])
    return banned
