"""``usage.prompt_tokens_details.cached_tokens`` on the real engine, in both frontends: of
two requests sharing a 200-token prefix the second reports at least the prefix's whole KV
blocks as cached, a fresh prompt reports 0; a batch counts each prompt once (as its first
choice found it). Every prompt here starts with a random word, so nothing another test
sent shares a block with it."""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from tests.e2e.servers import MODEL, REAL_ENGINE_ARGS, Server

pytestmark = pytest.mark.e2e

BLOCK = int(REAL_ENGINE_ARGS[REAL_ENGINE_ARGS.index("--block-size") + 1])
PREFIX = 200
CACHED = PREFIX // BLOCK * BLOCK  # the least the second request must find
WORDS = ("river stone cloud apple quiet lantern maple violet anchor harbor meadow copper "
         "signal garden winter silver candle forest pebble thunder").split()


def cached(usage: Any) -> int:
    return usage.prompt_tokens_details.cached_tokens


def random_ids(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(1000, 100_000) for _ in range(n)]


def random_text(rng: random.Random, words: int) -> str:
    return " ".join([uuid.uuid4().hex, *(rng.choice(WORDS) for _ in range(words))])


def test_completions_count_the_shared_prefix(real_server: Server) -> None:
    client = real_server.client()
    rng = random.Random(uuid.uuid4().int)
    prefixes = [random_ids(rng, PREFIX) for _ in range(2)]

    def complete(prompt: list[int] | list[list[int]], **extra: Any) -> Any:
        return client.completions.create(model=MODEL, prompt=prompt, max_tokens=2,
                                         temperature=0, **extra)

    first = complete(prefixes[0] + random_ids(rng, 8))
    assert cached(first.usage) == 0, first.usage
    stream = complete(prefixes[0] + random_ids(rng, 8), stream=True,
                      stream_options={"include_usage": True})
    usage = [chunk for chunk in stream][-1].usage
    assert CACHED <= cached(usage) < usage.prompt_tokens, usage

    complete(prefixes[1] + random_ids(rng, 8))
    # Both prompts share a cached prefix, 2 choices each: each prompt counts once.
    batch = complete([p + random_ids(rng, 8) for p in prefixes], n=2)
    assert len(batch.choices) == 4 and batch.usage.prompt_tokens == 2 * (PREFIX + 8)
    assert 2 * CACHED <= cached(batch.usage) <= batch.usage.prompt_tokens - 2, batch.usage


def test_chat_counts_the_shared_prefix(real_server: Server, tokenizer: Any) -> None:
    client = real_server.client()
    rng = random.Random(uuid.uuid4().int)
    system = {"role": "system", "content": random_text(rng, 250)}

    def chat(messages: list[dict[str, str]], **extra: Any) -> Any:
        return client.chat.completions.create(model=MODEL, messages=messages, max_tokens=2,
                                              temperature=0, **extra)

    asks = [[system, {"role": "user", "content": random_text(rng, 5)}] for _ in range(2)]
    rendered = [tokenizer.apply_chat_template(a, add_generation_prompt=True, tokenize=True,
                                              return_dict=False) for a in asks]
    shared = next(i for i, (a, b) in enumerate(zip(*rendered, strict=False)) if a != b)
    assert shared >= PREFIX, "the two prompts must share at least the 200-token prefix"

    first = chat(asks[0])
    assert first.usage.prompt_tokens == len(rendered[0])
    assert cached(first.usage) == 0, first.usage
    stream = chat(asks[1], stream=True, stream_options={"include_usage": True})
    usage = [chunk for chunk in stream][-1].usage
    assert usage.prompt_tokens == len(rendered[1])
    assert CACHED <= cached(usage) <= shared, usage
    fresh = chat([{"role": "user", "content": random_text(rng, 20)}])
    assert cached(fresh.usage) == 0, fresh.usage
