"""KV block bookkeeping: pure Python, milliseconds."""

from __future__ import annotations

import pytest

from engine import protocol as p
from engine.runtime.kv_cache import KVCacheManager, hash_block
from engine.runtime.request import Request

pytestmark = pytest.mark.unit


def make_request(rid: str, prompt: list[int], max_tokens: int = 4) -> Request:
    return Request(rid, prompt, p.SamplingParams(max_tokens=max_tokens), 0.0, frozenset())


def admit(kv: KVCacheManager, req: Request, num_new: int | None = None) -> list[int]:
    """Admit ``req`` as the scheduler does; returns the prefix-hit blocks."""
    hits = kv.find_cached_prefix(req)
    cached = len(hits) * kv.block_size
    n = req.num_tokens - cached if num_new is None else num_new
    assert kv.allocate_slots(req, n, hits)
    req.num_computed_tokens = cached
    return hits


def compute(kv: KVCacheManager, req: Request, n: int) -> None:
    req.num_computed_tokens += n
    kv.cache_full_blocks(req)


def test_allocate_and_free_return_every_block() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=4, enable_prefix_caching=True)
    a, b = make_request("a", list(range(10))), make_request("b", list(range(100, 105)))
    admit(kv, a)
    admit(kv, b)
    assert len(a.block_ids) == 3 and len(b.block_ids) == 2
    assert not set(a.block_ids) & set(b.block_ids)
    assert kv.num_free_blocks == 3
    assert abs(kv.usage - 5 / 8) < 1e-9
    kv.free_request(a)
    kv.free_request(b)
    assert kv.num_free_blocks == 8 and kv.usage == 0.0
    assert a.block_ids == [] and b.block_ids == []


def test_allocation_is_all_or_nothing() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=4, enable_prefix_caching=False)
    a, b = make_request("a", list(range(12))), make_request("b", list(range(8)))
    admit(kv, a)
    assert not kv.allocate_slots(b, 8)  # needs 2 blocks, 1 free
    assert b.block_ids == [] and kv.num_free_blocks == 1
    # Growing past its last block takes the last free one; then nothing is left.
    a.num_computed_tokens = 12
    a.token_ids.append(7)
    assert kv.allocate_slots(a, 1) and len(a.block_ids) == 4
    assert not kv.allocate_slots(b, 1)


def test_prefix_hit_is_chained_and_keeps_the_last_token() -> None:
    kv = KVCacheManager(num_blocks=16, block_size=4, enable_prefix_caching=True)
    first = make_request("a", list(range(12)))
    admit(kv, first)
    compute(kv, first, 12)
    # Same 12 tokens: a full hit would leave nothing to compute; the last block is redone.
    same = make_request("b", list(range(12)))
    hits = admit(kv, same)
    assert hits == first.block_ids[:2] and same.num_computed_tokens == 8
    # Shared prefix of 2 blocks, different tail.
    other = make_request("c", list(range(8)) + [99, 98, 97, 96, 95])
    assert admit(kv, other) == first.block_ids[:2]
    # Block 2's tokens equal first's block 2, but block 1 differs: the chain breaks.
    shifted = make_request("d", [50, 51, 52, 53] + [60, 61, 62, 63] + list(range(8, 12)) + [1])
    assert admit(kv, shifted) == []
    assert kv.ref_cnt[first.block_ids[0]] == 3


def test_hit_verifies_tokens_not_just_the_hash() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=4, enable_prefix_caching=True)
    a = make_request("a", [1, 2, 3, 4, 5])
    admit(kv, a)
    compute(kv, a, 5)
    # Forge a collision: b's first-block hash points at a block holding other tokens.
    b = make_request("b", [9, 9, 9, 9, 5])
    kv.cached[hash_block(b"", [9, 9, 9, 9])] = a.block_ids[0]
    assert kv.find_cached_prefix(b) == []


def test_freed_blocks_stay_cached_in_lru_order() -> None:
    kv = KVCacheManager(num_blocks=6, block_size=2, enable_prefix_caching=True)
    a = make_request("a", [1, 2, 3, 4, 5])  # 2 full blocks + 1 partial
    admit(kv, a)
    compute(kv, a, 5)
    a_blocks = list(a.block_ids)
    kv.free_request(a)
    assert kv.num_free_blocks == 6
    # The partial (unhashed) block is reused first, then never-used blocks; the cached
    # head of the prompt is evicted last, tail block before head block.
    order = list(kv.free)
    assert order[0] == a_blocks[2]
    assert order[-2:] == [a_blocks[1], a_blocks[0]]
    # Still a hit after being freed.
    again = make_request("b", [1, 2, 3, 4, 7])
    assert admit(kv, again) == a_blocks[:2]
    kv.free_request(again)
    # Fill the pool: cached blocks get evicted and their hashes forgotten.
    hog = make_request("c", list(range(100, 112)))
    admit(kv, hog)
    assert kv.num_free_blocks == 0 and kv.cached == {}
    kv.free_request(hog)
    assert kv.find_cached_prefix(make_request("d", [1, 2, 3, 4, 7])) == []


def test_duplicate_content_is_cached_once() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=2, enable_prefix_caching=True)
    a, b = make_request("a", [1, 2, 3]), make_request("b", [1, 2, 3])
    admit(kv, a)
    admit(kv, b)  # admitted before a computed anything: no hit, own blocks
    compute(kv, a, 3)
    compute(kv, b, 3)
    assert len(kv.cached) == 1
    kv.free_request(a)
    kv.free_request(b)
    assert kv.num_free_blocks == 8


def test_prefix_caching_off_never_hits() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=2, enable_prefix_caching=False)
    a = make_request("a", [1, 2, 3, 4, 5])
    admit(kv, a)
    compute(kv, a, 5)
    assert kv.cached == {}
    assert kv.find_cached_prefix(make_request("b", [1, 2, 3, 4, 5])) == []


def test_reset_prefix_cache() -> None:
    kv = KVCacheManager(num_blocks=8, block_size=2, enable_prefix_caching=True)
    a = make_request("a", [1, 2, 3, 4, 5])
    admit(kv, a)
    compute(kv, a, 5)
    kv.free_request(a)
    assert kv.reset_prefix_cache() == 2
    assert kv.find_cached_prefix(make_request("b", [1, 2, 3, 4, 5])) == []
