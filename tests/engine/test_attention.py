"""The attention backends against a plain per-request reference on random paged caches.

Each case mixes what a step can hold: decodes, a one-token prompt, fresh multi-token
prompts, later chunks and prefix-cache hits (two requests reading the same physical
blocks), with block tables scattered over the cache. The reference is one SDPA call per
request over its own K/V, read slot by slot from the cache.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.runtime.attention.base import AttentionBackend, StepBatch
from engine.runtime.attention.flex import FlexBackend
from engine.runtime.attention.resident import ResidentBackend
from engine.runtime.attention.sdpa import SdpaBackend
from engine.runtime.attention.selection import select_backend

pytestmark = pytest.mark.unit

BS, HEADS, KV_HEADS, DIM = 4, 4, 2, 8
SCALE = DIM**-0.5
CPU = torch.device("cpu")

# (tokens already in the cache, tokens this step); singles (1 token) come first.
MIXED = [(9, 1), (0, 1), (22, 1), (3, 1), (13, 1), (0, 7), (8, 5), (12, 3)]


def _case(
    shape: list[tuple[int, int]], dtype: torch.dtype, seed: int, shared_prefix: bool = True
) -> tuple[StepBatch, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A batch, a random cache and this step's q and kv (the cache is not yet written)."""
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    num_blocks = 64
    cache = torch.randn(num_blocks + 1, BS, 2, KV_HEADS, DIM, generator=gen).to(dtype)
    cache[num_blocks] = 0  # the scratch block stays zero, as the runner keeps it
    free = list(range(num_blocks))
    rng.shuffle(free)
    prefix = [free.pop(), free.pop()]  # two full blocks two requests both start with
    tables: list[list[int]] = []
    for i, (start, n) in enumerate(shape):
        need = -(-(start + n) // BS)
        share = shared_prefix and i in (2, 6) and start >= 2 * BS
        table = list(prefix) if share else []
        table += [free.pop() for _ in range(need - len(table))]
        tables.append(table + [free.pop()])  # one spare block past the context, as after a grow
    slots = [
        tables[i][pos // BS] * BS + pos % BS
        for i, (start, n) in enumerate(shape)
        for pos in range(start, start + n)
    ]
    singles = [i for i, (_, n) in enumerate(shape) if n == 1]
    chunks = [i for i, (_, n) in enumerate(shape) if n > 1]
    assert singles + chunks == list(range(len(shape))), "singles must come first"
    batch = StepBatch(
        block_size=BS,
        scratch_block=num_blocks,
        slot_mapping=torch.tensor(slots, dtype=torch.long),
        single_ctx=[shape[i][0] + 1 for i in singles],
        single_tables=[tables[i] for i in singles],
        chunk_starts=np.array([shape[i][0] for i in chunks], dtype=np.int64),
        chunk_lens=np.array([shape[i][1] for i in chunks], dtype=np.int64),
        chunk_tables=[tables[i] for i in chunks],
        single_keys=[f"request-{i}" for i in singles],
    )
    tokens = len(slots)
    q = torch.randn(tokens, HEADS, DIM, generator=gen).to(dtype)
    kv = torch.randn(tokens, 2, KV_HEADS, DIM, generator=gen).to(dtype)
    return batch, cache, q, kv


def reference_attention(batch: StepBatch, cache: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """One SDPA per request over its context read slot by slot (cache already written)."""
    shape = [(ctx - 1, 1) for ctx in batch.single_ctx] + [
        (int(s), int(n)) for s, n in zip(batch.chunk_starts, batch.chunk_lens, strict=True)
    ]
    tables = batch.single_tables + batch.chunk_tables
    flat = cache.float().view(-1, 2, KV_HEADS, DIM)
    outs, row = [], 0
    for (start, n), table in zip(shape, tables, strict=True):
        ctx = start + n
        slots = torch.tensor([table[p // BS] * BS + p % BS for p in range(ctx)])
        keys = flat[slots, 0].transpose(0, 1).repeat_interleave(HEADS // KV_HEADS, 0)
        values = flat[slots, 1].transpose(0, 1).repeat_interleave(HEADS // KV_HEADS, 0)
        queries = q[row : row + n].float().transpose(0, 1)
        mask = torch.arange(ctx)[None, :] <= start + torch.arange(n)[:, None]
        out = F.scaled_dot_product_attention(queries, keys, values, attn_mask=mask, scale=SCALE)
        outs.append(out.transpose(0, 1).reshape(n, HEADS * DIM))
        row += n
    return torch.cat(outs)


def _run(backend: AttentionBackend, shape: list[tuple[int, int]], dtype: torch.dtype, seed: int):
    batch, cache, q, kv = _case(shape, dtype, seed)
    out = backend.build(batch).forward(0, q, kv, cache, SCALE)
    return out, reference_attention(batch, cache, q)


@pytest.mark.parametrize(
    "shape",
    [MIXED, MIXED[:5], MIXED[5:], [(0, 6)], [(0, 6), (0, 3)], [(5, 1)]],
    ids=["mixed", "decodes", "chunks", "one-prompt", "prompts", "one-decode"],
)
@pytest.mark.parametrize(
    "make", [SdpaBackend, ResidentBackend, lambda dev: FlexBackend(dev, compiled=False)],
    ids=["sdpa", "resident", "flex-eager"],
)
def test_backend_matches_per_request_reference(make, shape: list[tuple[int, int]]) -> None:
    for seed in range(3):
        out, ref = _run(make(CPU), shape, torch.float32, seed)
        assert out.shape == ref.shape
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("make", [SdpaBackend, ResidentBackend], ids=["sdpa", "resident"])
def test_bfloat16_is_close_to_the_float32_reference(make) -> None:
    out, ref = _run(make(CPU), MIXED, torch.bfloat16, 0)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)


def test_flex_compiled_matches_reference() -> None:
    """The one test that pays FlexAttention's inductor compile (about 10-30 s)."""
    out, ref = _run(FlexBackend(CPU, compiled=True), MIXED, torch.float32, 1)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_a_stale_cache_entry_does_not_leak() -> None:
    """Slots past a request's context hold someone else's K/V; no backend may read them."""
    batch, cache, q, kv = _case(MIXED[:5], torch.float32, 7)
    reference = _reference_after_write(batch, cache, q, kv)
    for backend in (SdpaBackend(CPU), ResidentBackend(CPU), FlexBackend(CPU, compiled=False)):
        poisoned = cache.clone()
        for table, ctx in zip(batch.single_tables, batch.single_ctx, strict=True):
            block, offset = table[(ctx - 1) // BS], (ctx - 1) % BS
            poisoned[block, offset + 1 :] = 1e4  # past the context in its last block
            poisoned[table[-1]] = 1e4  # the spare block after it
        out = backend.build(batch).forward(0, q, kv, poisoned, SCALE)
        torch.testing.assert_close(out, reference, atol=1e-5, rtol=1e-5)


def _reference_after_write(
    batch: StepBatch, cache: torch.Tensor, q: torch.Tensor, kv: torch.Tensor
) -> torch.Tensor:
    written = cache.clone()
    written.view(-1, 2, KV_HEADS, DIM)[batch.slot_mapping] = kv
    return reference_attention(batch, written, q)


def test_selection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VRS_ATTENTION", raising=False)
    assert select_backend(CPU, enforce_eager=False).name == "resident"
    assert select_backend(torch.device("cuda"), enforce_eager=False).name == "sdpa"
    monkeypatch.setenv("VRS_ATTENTION", "sdpa")
    assert select_backend(CPU, enforce_eager=False).name == "sdpa"
    monkeypatch.setenv("VRS_ATTENTION", "resident")
    with pytest.raises(ValueError, match="only measured for the CPU"):
        select_backend(torch.device("cuda"), enforce_eager=False)
    monkeypatch.setenv("VRS_ATTENTION", "flex")
    assert select_backend(CPU, enforce_eager=False).name == "flex"
    assert select_backend(CPU, enforce_eager=True).name == "sdpa"
    with pytest.raises(ValueError, match="CPU"):
        select_backend(torch.device("cuda"), enforce_eager=False)
    monkeypatch.setenv("VRS_ATTENTION", "flash")
    with pytest.raises(ValueError, match="allowed: auto, resident, sdpa, flex"):
        select_backend(CPU, enforce_eager=False)


def test_one_backend_over_steps_of_changing_size_and_dtype() -> None:
    """The SDPA backend reuses one gather buffer: it must grow, and follow a new dtype."""
    backend = SdpaBackend(CPU)
    steps = [MIXED[:2], MIXED, MIXED[:5], [(30, 1)] * 6 + [(20, 4)], MIXED[:3]]
    for i, shape in enumerate(steps):
        out, ref = _run(backend, shape, torch.float32, 10 + i)
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    out, ref = _run(backend, MIXED, torch.bfloat16, 20)
    torch.testing.assert_close(out.float(), ref, atol=3e-2, rtol=3e-2)
    assert backend.gather.buffer is not None and backend.gather.buffer.dtype == torch.bfloat16
