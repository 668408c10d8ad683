"""Resident K/V: the decoding sequences' K and V kept contiguous, one row each.

Decode attention reads every cached token of every running sequence each step, so it
is bound by memory traffic. The gather path (``sdpa.py``) copies all of it out of the
paged blocks into a padded buffer first (a read and a write of the whole context, per
layer, per step), then SDPA reads it again; and SDPA's CPU kernel is slow at one query
token. Here each sequence that decodes owns a row of two per-layer tensors ``[rows,
kv_heads, capacity, head_dim]`` (K and V) holding its context, and a step only appends
its one new token per row. Attention is then two batched matmuls over the first ``n``
rows (contiguous, so no copy) with an float32 softmax between them.

The paged cache stays the truth: prefill, prefix caching and preemption use it alone,
and a row is (re)filled from it when a sequence starts decoding, comes back, or its row
was dropped. Per step, on the host (``ResidentBackend.build``), once for all layers:

* the step's single-token queries own rows ``0..n-1`` (so the matmuls read a prefix of
  the tensors); a sequence that was in the last step too keeps its row (it holds all of
  its context but the newest token), any other is filled; rows of sequences not in the
  step are dropped, and surviving rows at ``n`` or beyond move down into the holes;
* the capacity is the longest context rounded up to ``CAPACITY_TOKENS`` (whole blocks);
  it is re-laid out when a context outgrows it, or when it is two steps too large;
* rows times capacity may hold at most as many tokens as the paged cache (the KV budget
  is split between the two: ``kv_copies = 2``, engine/runtime/kv_budget.py): past that
  the step's decodes use the gather path and every row is dropped, until a step fits
  again (rows are padded to the longest context, so a batch of very uneven lengths in
  a full cache can exceed it).

Each layer's ``forward`` carries out the plan on that layer's tensors (re-layout,
moves, fills), appends the step's K/V, and attends. Multi-token chunks run the gather +
SDPA code (``sdpa.py``) over the paged cache.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass

import torch

from engine.runtime.attention.base import AttentionBackend, AttentionMetadata, StepBatch, write_kv
from engine.runtime.attention.sdpa import SdpaBackend, SdpaMetadata, padded_table
from engine.runtime.kv_cache import cdiv

logger = logging.getLogger("vrs.engine")

CAPACITY_TOKENS = 32  # capacity grows in steps of this, rounded up to whole blocks


@dataclass
class ResidentPlan:
    """What every layer does to its rows this step (host-side facts, device indices)."""

    rows_cap: int
    capacity: int
    move_from: torch.Tensor | None  # [m] rows at n or beyond that survive
    move_to: torch.Tensor | None  # [m] the holes below n they move into
    fill_rows: torch.Tensor | None  # [f] rows filled from the paged cache
    fill_blocks: torch.Tensor | None  # [f * fill_nb] their blocks, padded
    fill_nb: int
    append_rows: torch.Tensor  # [n] the row of each single query, in the step's order
    append_pos: torch.Tensor  # [n] the position of its new token
    query_order: torch.Tensor | None  # [n] the query of each row (None: row i = query i)
    mask: torch.Tensor  # [n, 1, capacity] float32 per row: 0, or -inf past the context


class ResidentRows:
    """The per-layer row tensors and which sequence holds which row (kept across steps)."""

    def __init__(self) -> None:
        self.keys: list[torch.Tensor | None] = []
        self.values: list[torch.Tensor | None] = []
        self.row_of: dict[Hashable, int] = {}
        self.rows_cap = 0
        self.capacity = 0

    def drop(self) -> None:
        self.keys.clear()
        self.values.clear()
        self.row_of.clear()
        self.rows_cap = self.capacity = 0

    def layer(self, layer: int, cache: torch.Tensor, plan: ResidentPlan) -> tuple[
        torch.Tensor, torch.Tensor
    ]:
        """This layer's K and V tensors: surviving rows moved below ``n`` first, then
        re-laid out to the plan's shape (which may have fewer rows) if needed."""
        while len(self.keys) <= layer:
            self.keys.append(None)
            self.values.append(None)
        kv_heads, head_dim = cache.shape[3], cache.shape[4]
        shape = (plan.rows_cap, kv_heads, plan.capacity, head_dim)
        pair = []
        for store in (self.keys, self.values):
            old = store[layer]
            if old is not None and plan.move_from is not None and plan.move_to is not None:
                old.index_copy_(0, plan.move_to, old.index_select(0, plan.move_from))
            if old is None or old.shape != shape:
                new = torch.zeros(shape, dtype=cache.dtype, device=cache.device)
                if old is not None:
                    rows, cap = min(old.shape[0], shape[0]), min(old.shape[2], shape[2])
                    new[:rows, :, :cap] = old[:rows, :, :cap]
                store[layer] = old = new
            pair.append(old)
        return pair[0], pair[1]


@dataclass
class ResidentMetadata(AttentionMetadata):
    rows: ResidentRows
    plan: ResidentPlan | None  # None: no single-token queries this step
    slot_mapping: torch.Tensor
    num_single: int
    chunks: SdpaMetadata | None  # the multi-token chunks, after the single tokens

    def forward(
        self, layer: int, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor, scale: float
    ) -> torch.Tensor:
        write_kv(kv_cache, kv, self.slot_mapping)
        outputs: list[torch.Tensor] = []
        if self.plan is not None:
            outputs.append(self.single_forward(layer, q, kv, kv_cache, scale, self.plan))
        if self.chunks is not None:
            outputs.append(self.chunks.chunk_forward(q, kv, kv_cache, scale))
        if len(outputs) == 1:
            return outputs[0]
        return torch.cat(outputs, dim=0)

    def single_forward(
        self,
        layer: int,
        q: torch.Tensor,
        kv: torch.Tensor,
        kv_cache: torch.Tensor,
        scale: float,
        plan: ResidentPlan,
    ) -> torch.Tensor:
        n, num_heads, head_dim = self.num_single, q.shape[1], q.shape[2]
        kv_heads = kv_cache.shape[3]
        keys, values = self.rows.layer(layer, kv_cache, plan)
        if plan.fill_rows is not None and plan.fill_blocks is not None:
            self._fill(keys, values, kv_cache, plan)
        keys[plan.append_rows, :, plan.append_pos] = kv[:n, 0]
        values[plan.append_rows, :, plan.append_pos] = kv[:n, 1]
        queries = q[:n]
        if plan.query_order is not None:
            queries = queries.index_select(0, plan.query_order)
        # [n * kv_heads, group, head_dim]: the group's query heads share one KV head.
        queries = queries.reshape(n * kv_heads, num_heads // kv_heads, head_dim)
        cap = plan.capacity
        k = keys[:n].view(n * kv_heads, cap, head_dim)
        v = values[:n].view(n * kv_heads, cap, head_dim)
        scores = torch.bmm(queries, k.transpose(1, 2)).float()
        # The mask is per row: every query head of the row (kv_heads x group) shares it.
        scores.mul_(scale).view(n, num_heads, cap).add_(plan.mask)
        probs = torch.softmax(scores, dim=-1).to(v.dtype)
        out = torch.bmm(probs, v).view(n, num_heads * head_dim)
        if plan.query_order is not None:
            out = out.index_select(0, plan.append_rows)
        return out

    @staticmethod
    def _fill(
        keys: torch.Tensor, values: torch.Tensor, kv_cache: torch.Tensor, plan: ResidentPlan
    ) -> None:
        """Copy the filled rows' contexts out of the paged cache (one gather for all)."""
        assert plan.fill_rows is not None and plan.fill_blocks is not None
        f = plan.fill_rows.shape[0]
        _, block_size, _, kv_heads, head_dim = kv_cache.shape
        length = plan.fill_nb * block_size
        gathered = kv_cache.index_select(0, plan.fill_blocks)
        gathered = gathered.view(f, length, 2, kv_heads, head_dim)
        keys[:, :, :length].index_copy_(0, plan.fill_rows, gathered[:, :, 0].transpose(1, 2))
        values[:, :, :length].index_copy_(0, plan.fill_rows, gathered[:, :, 1].transpose(1, 2))


class ResidentBackend(AttentionBackend):
    name = "resident"
    kv_copies = 2

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.sdpa = SdpaBackend(device)
        self.rows = ResidentRows()
        self.over_budget = False  # the last step's decodes did not fit (logged once per spell)

    def build(self, batch: StepBatch) -> AttentionMetadata:
        n = batch.num_single
        if n == 0:
            # Nobody decodes: every sequence is absent, so every row is dropped.
            self.rows.row_of.clear()
            chunks = self.sdpa.build(batch, singles=False) if batch.num_chunks else None
            return ResidentMetadata(self.rows, None, batch.slot_mapping, 0, chunks)
        plan = self._plan(batch)
        if plan is None:  # over budget: today's gather for this step
            return self.sdpa.build(batch)
        chunks = self.sdpa.build(batch, singles=False) if batch.num_chunks else None
        return ResidentMetadata(self.rows, plan, batch.slot_mapping, n, chunks)

    def _plan(self, batch: StepBatch) -> ResidentPlan | None:
        rows, bs, n = self.rows, batch.block_size, batch.num_single
        step = cdiv(CAPACITY_TOKENS, bs) * bs
        longest = max(batch.single_ctx)
        capacity = rows.capacity
        if capacity < longest or capacity - longest >= 2 * step:
            capacity = cdiv(longest, step) * step
        budget = batch.scratch_block * bs  # as many tokens as the paged cache holds
        if n * capacity > budget:
            capacity = cdiv(longest, bs) * bs  # the tightest fit
        if n * capacity > budget:
            if not self.over_budget:
                logger.info(
                    "resident K/V: %d decodes x %d tokens exceed the rows' share of the KV "
                    "budget; gathering from the paged cache until they fit", n, capacity,
                )
            self.over_budget = True
            rows.drop()
            return None
        self.over_budget = False
        # A quarter of spare rows (a batch grows a sequence at a time), where they fit.
        rows_cap = min(max(rows.rows_cap, n + n // 4), budget // capacity)

        keys = batch.single_keys
        # A sequence in the last step and in this one computed exactly one token in
        # between (a single query computes one); one that was absent (preempted,
        # prefilling) or new is filled.
        kept: dict[Hashable, int] = {}
        for key in keys:
            row = rows.row_of.get(key)
            if row is not None:
                kept[key] = row
        # Rows below n that are free (dropped, or never used) take the rest.
        used_low = {row for row in kept.values() if row < n}
        holes = [row for row in range(n) if row not in used_low]
        move_from: list[int] = []
        move_to: list[int] = []
        for key, row in kept.items():
            if row >= n:
                hole = holes.pop()
                move_from.append(row)
                move_to.append(hole)
                kept[key] = hole
        # The filled sequences: their rows, context before this step's token, block table.
        fills: list[tuple[int, int, list[int]]] = []
        for key, ctx, table in zip(keys, batch.single_ctx, batch.single_tables, strict=True):
            if key not in kept:
                kept[key] = holes.pop()
                fills.append((kept[key], ctx - 1, table))

        row_of = {key: kept[key] for key in keys}
        rows.row_of = row_of
        rows.rows_cap, rows.capacity = rows_cap, capacity

        append_rows = [row_of[key] for key in keys]
        ctx_by_row = [0] * n
        order = [0] * n
        for i, (row, ctx) in enumerate(zip(append_rows, batch.single_ctx, strict=True)):
            ctx_by_row[row] = ctx
            order[row] = i
        dev = self.device
        mask = _mask(ctx_by_row, capacity)
        fill_t = fill_blocks = None
        fill_nb = 0
        longest_fill = max((filled for _, filled, _ in fills), default=0)
        if longest_fill > 0:  # (a one-token prompt has nothing cached to fill)
            fill_nb = cdiv(longest_fill, bs)
            needs = [cdiv(filled, bs) for _, filled, _ in fills]
            tables = [table for _, _, table in fills]
            flat = padded_table(tables, needs, fill_nb, batch.scratch_block)
            fill_t = _index([row for row, _, _ in fills], dev)
            fill_blocks = torch.tensor(flat, dtype=torch.long).to(dev, non_blocking=True)
        identity = order == list(range(n))
        return ResidentPlan(
            rows_cap=rows_cap,
            capacity=capacity,
            move_from=_index(move_from, dev),
            move_to=_index(move_to, dev),
            fill_rows=fill_t,
            fill_blocks=fill_blocks,
            fill_nb=fill_nb,
            append_rows=torch.tensor(append_rows, dtype=torch.long).to(dev, non_blocking=True),
            append_pos=torch.tensor(
                [ctx - 1 for ctx in batch.single_ctx], dtype=torch.long
            ).to(dev, non_blocking=True),
            query_order=None if identity else _index(order, dev),
            mask=mask.to(dev, non_blocking=True),
        )


def _mask(ctx_by_row: list[int], capacity: int) -> torch.Tensor:
    """``[rows, 1, capacity]`` float32: 0 within each row's context, -inf past it."""
    ctx = torch.tensor(ctx_by_row, dtype=torch.long)
    hidden = torch.arange(capacity)[None, :] >= ctx[:, None]
    mask = torch.zeros(hidden.shape, dtype=torch.float32).masked_fill_(hidden, float("-inf"))
    return mask[:, None, :]


def _index(values: list[int], device: torch.device) -> torch.Tensor | None:
    if not values:
        return None
    return torch.tensor(values, dtype=torch.long).to(device, non_blocking=True)
