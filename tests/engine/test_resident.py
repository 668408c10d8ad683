"""Resident K/V over many steps: rows kept, moved, refilled and dropped as a real batch
changes, checked against the per-request reference at every step and layer.

A small simulated engine: sequences with block tables scattered over two layers' paged
caches decode one token per step; sequences finish, arrive (their prompt already in the
cache, as after a prefill), skip a step (as when preempted) and come back, a long one
makes the capacity grow and, once gone, shrink; a step with a prefill chunk and a step
without any decode come in between; a cache too small for the rows falls back to the
gather and recovers.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from engine.runtime.attention.base import StepBatch
from engine.runtime.attention.resident import ResidentBackend
from tests.engine.test_attention import BS, DIM, HEADS, KV_HEADS, SCALE, reference_attention

pytestmark = pytest.mark.unit

CPU = torch.device("cpu")
LAYERS = 2


class Sim:
    def __init__(self, num_blocks: int, seed: int, dtype: torch.dtype = torch.float32) -> None:
        self.rng = random.Random(seed)
        self.gen = torch.Generator().manual_seed(seed)
        self.num_blocks = num_blocks
        self.dtype = dtype
        self.caches = [
            torch.randn(num_blocks + 1, BS, 2, KV_HEADS, DIM, generator=self.gen).to(dtype)
            for _ in range(LAYERS)
        ]
        for cache in self.caches:
            cache[num_blocks] = 0
        self.free = list(range(num_blocks))
        self.rng.shuffle(self.free)
        self.tables: dict[str, list[int]] = {}
        self.length: dict[str, int] = {}  # tokens in the cache
        self.backend = ResidentBackend(CPU)
        self.fallbacks = 0

    def add(self, name: str, prompt: int) -> None:
        """A sequence whose prompt is in the cache (its K/V are the cache's random values)."""
        self.tables[name] = []
        self.length[name] = prompt
        self._grow(name, prompt + 1)

    def finish(self, name: str) -> None:
        self.free.extend(self.tables.pop(name))
        del self.length[name]

    def _grow(self, name: str, tokens: int) -> None:
        table = self.tables[name]
        while len(table) * BS < tokens:
            table.append(self.free.pop())

    def step(self, decoding: list[str], chunk: tuple[str, int] | None = None) -> None:
        """One step: ``decoding`` each add a token; ``chunk`` (name, tokens) prefills."""
        slots: list[int] = []
        for name in decoding:
            self._grow(name, self.length[name] + 1)
            pos = self.length[name]
            slots.append(self.tables[name][pos // BS] * BS + pos % BS)
        starts, lens, chunk_tables = [], [], []
        if chunk is not None:
            name, n = chunk
            start = self.length[name]
            self._grow(name, start + n)
            slots += [self.tables[name][p // BS] * BS + p % BS for p in range(start, start + n)]
            starts, lens, chunk_tables = [start], [n], [self.tables[name]]
        batch = StepBatch(
            block_size=BS,
            scratch_block=self.num_blocks,
            slot_mapping=torch.tensor(slots, dtype=torch.long),
            single_ctx=[self.length[name] + 1 for name in decoding],
            single_tables=[self.tables[name] for name in decoding],
            chunk_starts=np.array(starts, dtype=np.int64),
            chunk_lens=np.array(lens, dtype=np.int64),
            chunk_tables=chunk_tables,
            single_keys=list(decoding),
        )
        meta = self.backend.build(batch)
        self.fallbacks += type(meta).__name__ == "SdpaMetadata"
        tokens = len(slots)
        for layer, cache in enumerate(self.caches):
            q = torch.randn(tokens, HEADS, DIM, generator=self.gen).to(self.dtype)
            kv = torch.randn(tokens, 2, KV_HEADS, DIM, generator=self.gen).to(self.dtype)
            out = meta.forward(layer, q, kv, cache, SCALE)
            ref = reference_attention(batch, cache, q)  # the cache now holds this step's K/V
            if self.dtype == torch.float32:
                torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
            else:
                torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)
        for name in decoding:
            self.length[name] += 1
        if chunk is not None:
            self.length[chunk[0]] += chunk[1]


def test_rows_follow_a_changing_batch() -> None:
    sim = Sim(num_blocks=400, seed=0)
    names = [f"s{i}" for i in range(6)]
    for i, name in enumerate(names):
        sim.add(name, 3 + 5 * i)
    for _ in range(3):
        sim.step(names)  # steady: every row kept, one token appended
    rows = sim.backend.rows
    assert sorted(rows.row_of.values()) == list(range(6))
    sim.finish("s0")
    sim.finish("s2")  # two holes below n: s4 and s5 move down
    names = ["s1", "s3", "s4", "s5"]
    sim.step(names)
    assert sorted(rows.row_of.values()) == [0, 1, 2, 3]
    sim.add("t0", 11)  # a new sequence is filled from the paged cache
    sim.step(["t0", *names])
    sim.step(["s1", "s4", "s5", "t0"])  # s3 skips a step (preempted) ...
    sim.step(["s1", "s3", "s4", "s5", "t0"])  # ... and is refilled when it is back
    sim.add("long", 150)  # the capacity grows past the longest context
    before = rows.capacity
    sim.step(["long", "s1", "s3"], chunk=("t0", 5))  # with a prefill chunk after the decodes
    assert rows.capacity > before >= 32
    sim.step([], chunk=("s5", 2))  # a step with no decode at all
    sim.step(["s1", "s3", "long"], chunk=("s4", 3))
    sim.finish("long")  # the capacity shrinks once it is two steps too large
    sim.step(["s1", "s3", "s5"])
    assert rows.capacity < 100
    assert sim.fallbacks == 0


def test_many_random_steps_in_bfloat16() -> None:
    sim = Sim(num_blocks=600, seed=3, dtype=torch.bfloat16)
    rng = random.Random(5)
    live: list[str] = []
    for step in range(40):
        if len(live) < 10 and rng.random() < 0.4:
            name = f"r{step}"
            sim.add(name, rng.randint(0, 40))
            live.append(name)
        if live and rng.random() < 0.15:
            sim.finish(live.pop(rng.randrange(len(live))))
        decoding = [name for name in live if rng.random() < 0.9]
        rng.shuffle(decoding)  # the step's order need not be the rows' order
        if decoding:  # the engine never runs an empty step
            sim.step(decoding)


def test_a_cache_too_small_for_the_rows_gathers_instead() -> None:
    # 10 blocks x 4 tokens: the paged cache holds a short and a long sequence (2 + 8
    # blocks), but their rows, padded to the longest context (28, then 32 tokens), need
    # 56 and 64 of the rows' 40 slots.
    sim = Sim(num_blocks=10, seed=1)
    sim.add("a", 3)
    sim.step(["a"])
    assert sim.fallbacks == 0
    sim.add("b", 26)
    sim.step(["a", "b"])
    sim.step(["a", "b"])
    assert sim.fallbacks == 2 and not sim.backend.rows.row_of
    sim.finish("b")
    sim.step(["a"])  # fits again: refilled from the paged cache
    assert sim.fallbacks == 2 and list(sim.backend.rows.row_of) == ["a"]
