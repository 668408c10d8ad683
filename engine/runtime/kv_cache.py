"""KV block bookkeeping: block pool, per-request block tables, prefix cache.

Pure Python, no tensors: the model runner turns block ids into slots. Rules:

* a block is either in use (``ref_cnt > 0``) or on the free list;
* the free list is an LRU: allocation takes from the front, freed blocks go to the
  back (blocks holding a cached prefix) or the front (blocks holding nothing reusable),
  and a request's blocks are freed tail first, so a prompt's head outlives its tail;
* a full block computed for a request is registered under the chained hash of its
  tokens (``hash(parent_hash, tokens)``); a lookup also compares the tokens, so a hash
  collision can never hand out the wrong K/V;
* a cached block stays reusable while it sits on the free list, until it is taken for
  new tokens (evicted);
* a prefix hit never covers the last prompt token: the model must see at least one
  token to produce logits;
* a request's ``cache_salt`` (vLLM's) salts its first block's hash, and through the chain
  every later one: requests with different salts (or one salted, one not) never share a
  cached block, while requests with the same salt do.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict

from engine.runtime.request import Request

ROOT_HASH = b""


def hash_block(parent_hash: bytes, tokens: list[int]) -> bytes:
    """Chained hash of one full block: depends on every token before it too."""
    return hashlib.blake2b(parent_hash + array("q", tokens).tobytes(), digest_size=16).digest()


def root_hash(cache_salt: str | None) -> bytes:
    """The parent hash of a request's first block: its salt's own digest, or none."""
    if cache_salt is None:
        return ROOT_HASH
    return hashlib.blake2b(b"cache_salt\0" + cache_salt.encode(), digest_size=16).digest()


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVCacheManager:
    """Allocates blocks of ``block_size`` token slots out of ``num_blocks``."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks must be >= 1, got {num_blocks}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.ref_cnt = [0] * num_blocks
        self.block_hash: list[bytes | None] = [None] * num_blocks
        self.block_tokens: list[tuple[int, ...] | None] = [None] * num_blocks
        self.free: OrderedDict[int, None] = OrderedDict.fromkeys(range(num_blocks))
        self.cached: dict[bytes, int] = {}
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0

    # ------------------------------------------------------------------ state

    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    @property
    def usage(self) -> float:
        return 1.0 - len(self.free) / self.num_blocks

    def blocks_needed(self, num_tokens: int) -> int:
        return cdiv(num_tokens, self.block_size)

    # ------------------------------------------------------------------ prefix cache

    def _extend_hashes(self, request: Request, num_blocks: int) -> None:
        hashes = request.block_hashes
        bs = self.block_size
        tokens = request.token_ids
        while len(hashes) < num_blocks:
            i = len(hashes)
            parent = hashes[-1] if hashes else root_hash(request.cache_salt)
            hashes.append(hash_block(parent, tokens[i * bs:(i + 1) * bs]))

    def find_cached_prefix(self, request: Request) -> list[int]:
        """Block ids holding the longest cached prefix of ``request`` (refs unchanged).

        At most ``(num_tokens - 1) // block_size`` blocks: the last token is recomputed.
        """
        if not self.enable_prefix_caching:
            return []
        max_blocks = (request.num_tokens - 1) // self.block_size
        self._extend_hashes(request, max_blocks)
        bs = self.block_size
        tokens = request.token_ids
        hits: list[int] = []
        for i in range(max_blocks):
            block_id = self.cached.get(request.block_hashes[i])
            if block_id is None:
                break
            if self.block_tokens[block_id] != tuple(tokens[i * bs:(i + 1) * bs]):
                break
            hits.append(block_id)
        return hits

    def record_lookup(self, num_tokens: int, num_hit_tokens: int) -> None:
        if self.enable_prefix_caching:
            self.prefix_cache_queries += num_tokens
            self.prefix_cache_hits += num_hit_tokens

    def cache_full_blocks(self, request: Request) -> None:
        """Register the request's newly computed full blocks in the prefix cache."""
        if not self.enable_prefix_caching:
            return
        num_full = request.num_computed_tokens // self.block_size
        if num_full <= request.num_cached_blocks:
            return
        self._extend_hashes(request, num_full)
        bs = self.block_size
        for i in range(request.num_cached_blocks, num_full):
            block_id = request.block_ids[i]
            if self.block_hash[block_id] is not None:
                continue  # a prefix hit: already registered
            h = request.block_hashes[i]
            if h in self.cached:
                continue  # same content computed twice at once; keep the first copy
            self.cached[h] = block_id
            self.block_hash[block_id] = h
            self.block_tokens[block_id] = tuple(request.token_ids[i * bs:(i + 1) * bs])
        request.num_cached_blocks = num_full

    def reset_prefix_cache(self) -> int:
        """Forget every cached prefix; returns how many entries were dropped."""
        dropped = len(self.cached)
        self.cached.clear()
        self.block_hash = [None] * self.num_blocks
        self.block_tokens = [None] * self.num_blocks
        return dropped

    # ------------------------------------------------------------------ allocation

    def allocate_slots(
        self, request: Request, num_new_tokens: int, cached_blocks: list[int] | None = None
    ) -> bool:
        """Give ``request`` blocks for ``num_new_tokens`` more tokens.

        ``cached_blocks`` (for a request being admitted) are prefix hits taken over
        first. Returns False, changing nothing, when the free list is too short.
        """
        cached_blocks = cached_blocks or []
        num_computed = request.num_computed_tokens + len(cached_blocks) * self.block_size
        total_blocks = self.blocks_needed(num_computed + num_new_tokens)
        num_new_blocks = total_blocks - len(request.block_ids) - len(cached_blocks)
        # Cached blocks that nobody uses sit on the free list: taking them costs too.
        num_revived = sum(1 for b in cached_blocks if self.ref_cnt[b] == 0)
        if max(num_new_blocks, 0) + num_revived > len(self.free):
            return False
        ref_cnt = self.ref_cnt
        for block_id in cached_blocks:
            if ref_cnt[block_id] == 0:
                del self.free[block_id]
            ref_cnt[block_id] += 1
        if cached_blocks:
            request.block_ids.extend(cached_blocks)
            request.num_cached_blocks = len(request.block_ids)
        for _ in range(num_new_blocks):
            block_id, _none = self.free.popitem(last=False)
            self._evict(block_id)
            ref_cnt[block_id] = 1
            request.block_ids.append(block_id)
        return True

    def _evict(self, block_id: int) -> None:
        h = self.block_hash[block_id]
        if h is not None:
            if self.cached.get(h) == block_id:
                del self.cached[h]
            self.block_hash[block_id] = None
            self.block_tokens[block_id] = None

    def free_request(self, request: Request) -> None:
        """Return every block of ``request`` (tail first)."""
        ref_cnt = self.ref_cnt
        for block_id in reversed(request.block_ids):
            ref_cnt[block_id] -= 1
            if ref_cnt[block_id] == 0:
                self.free[block_id] = None
                if self.block_hash[block_id] is None:
                    self.free.move_to_end(block_id, last=False)
        request.block_ids = []
        request.num_cached_blocks = 0
