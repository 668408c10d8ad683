"""The mock engine's made-up log-probabilities (engine/mock/engine.py's module doc says
what they promise): well formed, never sampled from logits."""

from __future__ import annotations

import array
import math
import random
import zlib

from engine import protocol as p

# Ids below this are the tokenizer's control tokens (bos, eos, pad) in most vocabularies;
# the mock never samples them so that output length is decided by the request alone.
FIRST_SAMPLED_ID = 3

# Mock top-k log-probabilities: the first probability and the ratio between neighbours
# are drawn from these ranges, so the k probabilities sum to at most 1.
_TOP_P_RANGE = (0.1, 0.5)
_TOP_RATIO_RANGE = (0.05, 0.5)
_GREEDY_SHARE = 0.6  # how often the sampled token is the most likely one
_MAX_MOCK_RANK = 10


def prompt_logprobs(ids: list[int], k: int, vocab_size: int) -> list[p.TokenLogprobs]:
    """Synthetic prompt logprobs (one entry per prompt token from the second on), seeded
    by the prompt's ids: the same prompt gets the same entries."""
    rng = random.Random(zlib.crc32(array.array("q", ids).tobytes()))
    return [made_up(rng, token, k, vocab_size) for token in ids[1:]]


def made_up(rng: random.Random, token: int, k: int, vocab_size: int) -> p.TokenLogprobs:
    """Made-up but well-formed log-probabilities for ``token`` and a top ``k``."""
    choices = vocab_size - FIRST_SAMPLED_ID  # distinct ids the mock can draw
    k = min(k, choices)
    rank = 1 if rng.random() < _GREEDY_SHARE else rng.randint(2, _MAX_MOCK_RANK)
    rank = min(rank, choices)
    probs = [rng.uniform(*_TOP_P_RANGE)]
    while len(probs) < max(k, rank):
        probs.append(probs[-1] * rng.uniform(*_TOP_RATIO_RANGE))
    ids: list[int] = []
    taken = {token}
    for position in range(max(k, rank)):
        if position == rank - 1:
            ids.append(token)
            continue
        other = rng.randrange(FIRST_SAMPLED_ID, vocab_size)
        while other in taken:
            other = rng.randrange(FIRST_SAMPLED_ID, vocab_size)
        taken.add(other)
        ids.append(other)
    logprobs = [math.log(prob) for prob in probs]
    return p.TokenLogprobs(token_id=token, logprob=logprobs[rank - 1], rank=rank,
                           top_token_ids=ids[:k], top_logprobs=logprobs[:k])
