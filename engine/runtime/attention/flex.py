"""FlexAttention over the paged cache: no per-step gather for single-token queries.

The layer's cache is viewed, without a copy, as one long KV sequence ``[1, kv_heads,
(num_blocks + 1) * block_size, head_dim]``; the single-token queries are a batch of
``n`` one-token sequences that share it. A ``BlockMask`` built once per step (KV block
size = the cache's block size) lists each query's blocks straight from its block table:
the blocks before its last are full (no mask), the last is partial. The ``mask_mod``
maps a physical slot to its position in the request (a per-step ``[n, num_blocks + 1]``
table) and hides what lies past the context; it is exact on every slot, since the
unfused path (``compiled=False``, used by the tests) evaluates it everywhere. The
kernel reads the blocks where they lie.

Multi-token chunks go through the SDPA backend (a fresh prompt needs no gather there).
Opt-in (``VRS_ATTENTION=flex``): on the CPU it measured 2-9x slower than gather + SDPA
(docs/lab/paged-attention-gather-18.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from engine.runtime.attention.base import AttentionBackend, AttentionMetadata, StepBatch, write_kv
from engine.runtime.attention.sdpa import SdpaBackend, SdpaMetadata, padded_table

FlexFn = Callable[..., torch.Tensor]


@dataclass
class FlexMetadata(AttentionMetadata):
    attend: FlexFn
    slot_mapping: torch.Tensor
    num_single: int
    padded: int  # num_single rounded up to a power of two (bounded recompiles)
    block_mask: BlockMask | None  # the single-token queries' blocks
    chunks: SdpaMetadata | None  # the multi-token chunks, after the single tokens

    def forward(
        self, layer: int, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor, scale: float
    ) -> torch.Tensor:
        num_heads, head_dim = q.shape[1], q.shape[2]
        kv_heads = kv.shape[2]
        write_kv(kv_cache, kv, self.slot_mapping)
        outputs: list[torch.Tensor] = []
        n = self.num_single
        if n:
            flat = kv_cache.view(-1, 2, kv_heads, head_dim)
            keys = flat[:, 0].transpose(0, 1).unsqueeze(0)
            values = flat[:, 1].transpose(0, 1).unsqueeze(0)
            # [padded n, heads, 1, head_dim]; the padding rows see no block at all.
            queries = F.pad(q[:n], (0, 0, 0, 0, 0, self.padded - n)).unsqueeze(2)
            out = self.attend(
                queries, keys, values, block_mask=self.block_mask, scale=scale,
                enable_gqa=num_heads != kv_heads,
            )
            outputs.append(out[:n].reshape(n, num_heads * head_dim))
        if self.chunks is not None:
            outputs.append(self.chunks.chunk_forward(q, kv, kv_cache, scale))
        if len(outputs) == 1:
            return outputs[0]
        return torch.cat(outputs, dim=0)


class FlexBackend(AttentionBackend):
    name = "flex"

    def __init__(self, device: torch.device, compiled: bool) -> None:
        self.device = device
        self.sdpa = SdpaBackend(device)
        # Static shapes: dynamic=True trips an inductor C++ template bug in torch 2.15
        # (``cur_kvSplitSize3`` undeclared); the batch is padded to powers of two instead.
        self.attend: FlexFn = flex_attention
        if compiled:
            self.attend = torch.compile(flex_attention, dynamic=False)

    def build(self, batch: StepBatch) -> FlexMetadata:
        block_mask = None
        n = batch.num_single
        padded = 1 << (n - 1).bit_length() if n else 0
        if n:
            block_mask = self._single_mask(batch, padded)
        chunks = None
        if batch.num_chunks:
            chunks = self.sdpa.build(batch, singles=False)
        return FlexMetadata(self.attend, batch.slot_mapping, n, padded, block_mask, chunks)

    def _single_mask(self, batch: StepBatch, n: int) -> BlockMask:
        """The block mask of the single-token queries, padded to ``n`` rows."""
        bs, pad = batch.block_size, n - batch.num_single
        total = batch.scratch_block + 1  # physical blocks, the scratch one included
        ctx = torch.tensor(batch.single_ctx + [0] * pad, dtype=torch.int64)
        needs = (ctx + bs - 1) // bs
        fulls = ctx // bs
        width = int(needs.max())
        tables = batch.single_tables + [[]] * pad
        table = torch.tensor(
            padded_table(tables, needs.tolist(), width, batch.scratch_block), dtype=torch.int64
        ).view(n, width)
        logical = torch.arange(width).expand(n, width)
        # Where each physical block sits in each request's context (-1: not in it).
        phys_to_logical = torch.full((n, total), -1, dtype=torch.int32)
        phys_to_logical.scatter_(
            1, table, torch.where(logical < needs[:, None], logical, -1).to(torch.int32)
        )
        phys_to_logical[:, batch.scratch_block] = -1
        # The block mask must span the whole cache: full blocks first, then the rest.
        kv_indices = torch.zeros((n, 1, 1, total), dtype=torch.int32)
        kv_indices[:, 0, 0, :width] = table.to(torch.int32)
        partial = kv_indices.clone()
        rows = torch.arange(n)
        partial[rows, 0, 0, 0] = table[rows, needs - 1].to(torch.int32)
        dev = self.device
        ctx_dev, p2l = ctx.to(dev), phys_to_logical.to(dev)

        def mask_mod(
            b: torch.Tensor, h: torch.Tensor, q_idx: torch.Tensor, kv_idx: torch.Tensor
        ) -> torch.Tensor:
            block = p2l[b, kv_idx // bs]
            return (block >= 0) & (block * bs + kv_idx % bs < ctx_dev[b])

        return BlockMask.from_kv_blocks(
            (needs - fulls).to(torch.int32).view(n, 1, 1).to(dev),
            partial.to(dev),
            fulls.to(torch.int32).view(n, 1, 1).to(dev),
            kv_indices.to(dev),
            BLOCK_SIZE=(1, bs),
            mask_mod=mask_mod,
            seq_lengths=(1, total * bs),
            compute_q_blocks=False,
        )
