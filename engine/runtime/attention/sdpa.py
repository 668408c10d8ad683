"""Gather + SDPA: the portable backend (every device, every dtype; the reference).

Each group of the step is one ``scaled_dot_product_attention`` call:

* single-token queries gather their blocks (``index_select`` into a padded copy, per
  layer), and the query heads of one KV head are folded into the query-length axis (no
  K/V expansion for GQA); the mask hides slots past each request's context;
* multi-token chunks are padded to the longest chunk. Without earlier context (a fresh
  prompt) keys are the chunk's own K/V and the mask is plain causal (query and key
  lengths are equal, so top-left alignment is right). With earlier context (a later
  chunk, or a prefix-cache hit) keys are gathered from the cache and the mask is aligned
  to the bottom right: query ``i`` of a chunk starting at position ``s`` sees keys
  ``0..s+i``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from engine.runtime.attention.base import AttentionBackend, AttentionMetadata, StepBatch, write_kv
from engine.runtime.attention.features import LayerFeatures, attend, visible
from engine.runtime.kv_cache import cdiv


class GatherBuffer:
    """The gather's destination, kept and reused by every layer and step.

    A fresh ``index_select`` result of tens of MiB is a fresh ``mmap`` whose every page
    faults on first write; at 64 sequences x 512 tokens that made the gather cost 3-5x
    the SDPA after it. One buffer, grown to the largest step seen and never shrunk,
    holds each layer's gather until its SDPA has read it (layers run one after another).
    """

    def __init__(self) -> None:
        self.buffer: torch.Tensor | None = None

    def gather(
        self, cache: torch.Tensor, blocks: torch.Tensor, n: int, nb: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V ``[n, kv_heads, nb * block_size, head_dim]`` of ``n`` requests' blocks."""
        _, block_size, _, kv_heads, head_dim = cache.shape
        count = blocks.shape[0]
        buf = self.buffer
        if (
            buf is None
            or buf.shape[0] < count
            or buf.shape[1:] != cache.shape[1:]
            or buf.dtype != cache.dtype
            or buf.device != cache.device
        ):
            # A quarter more than asked: contexts grow a block at a time.
            buf = self.buffer = torch.empty(
                (count + count // 4, *cache.shape[1:]), dtype=cache.dtype, device=cache.device
            )
        out = buf[:count]
        torch.index_select(cache, 0, blocks, out=out)
        kv = out.view(n, nb * block_size, 2, kv_heads, head_dim)
        return kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)


def padded_table(tables: list[list[int]], needs: list[int], width: int, scratch: int) -> list[int]:
    """Each table's first ``need`` blocks, padded to ``width`` with the scratch block."""
    flat: list[int] = []
    for table, need in zip(tables, needs, strict=True):
        flat.extend(table[:need])
        flat.extend([scratch] * (width - need))
    return flat


@dataclass
class SdpaMetadata(AttentionMetadata):
    gather: GatherBuffer
    slot_mapping: torch.Tensor  # [T]
    num_single: int  # tokens [0, num_single) are single-token queries
    single_blocks: torch.Tensor | None  # [n * nb] flattened block table
    single_num_blocks: int
    single_mask: torch.Tensor | None  # [n, 1, 1, nb * block_size] bool
    num_chunks: int  # multi-token chunks after the single tokens
    chunk_len: int  # padded chunk length
    chunk_index: torch.Tensor | None  # [num_chunks * chunk_len] rows of the chunk tokens
    chunk_out_index: torch.Tensor | None  # [num_chunk_tokens] real rows of the padded output
    chunk_blocks: torch.Tensor | None  # [num_chunks * nb]; None: keys are the chunk itself
    chunk_num_blocks: int
    chunk_mask: torch.Tensor | None  # [num_chunks, 1, chunk_len, nb * block_size] bool
    # Host-side positions, for ``forward_features`` only (turned into tensors once a step).
    single_ctx: list[int] = field(default_factory=list)
    chunk_starts: np.ndarray | None = None
    _positions: tuple[torch.Tensor, torch.Tensor] | None = None

    def forward(
        self, layer: int, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor, scale: float
    ) -> torch.Tensor:
        write_kv(kv_cache, kv, self.slot_mapping)
        outputs: list[torch.Tensor] = []
        if self.num_single:
            outputs.append(self.single_forward(q, kv_cache, scale))
        if self.num_chunks:
            outputs.append(self.chunk_forward(q, kv, kv_cache, scale))
        if len(outputs) == 1:
            return outputs[0]
        return torch.cat(outputs, dim=0)

    def forward_features(
        self, layer: int, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor,
        scale: float, features: LayerFeatures,
    ) -> torch.Tensor:
        """``forward`` for a layer with a sliding window, soft-capping or sinks
        (engine/runtime/attention/features.py): the same groups and gathers, and the
        scores computed in float32 with the layer's features."""
        write_kv(kv_cache, kv, self.slot_mapping)
        single_pos, chunk_pos = self.positions(q.device)
        window = features.sliding_window
        n, num_heads, head_dim = self.num_single, q.shape[1], q.shape[2]
        outputs: list[torch.Tensor] = []
        if n:
            assert self.single_blocks is not None
            keys, values = self.gather.gather(kv_cache, self.single_blocks, n,
                                              self.single_num_blocks)
            seen = visible(single_pos[:, None], keys.shape[2], window)
            out = attend(q[:n].unsqueeze(2), keys, values, seen, scale, features)
            outputs.append(out.reshape(n, num_heads * head_dim))
        if self.num_chunks:
            queries, keys, values = self.chunk_inputs(q, kv, kv_cache)
            seen = visible(chunk_pos, keys.shape[2], window)
            outputs.append(self.chunk_output(attend(queries, keys, values, seen, scale,
                                                    features)))
        return outputs[0] if len(outputs) == 1 else torch.cat(outputs, dim=0)

    def positions(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """The position of each single query ``[n]`` and of each padded chunk row
        ``[c, chunk_len]`` (a chunk without earlier context starts at 0)."""
        if self._positions is None:
            single = torch.tensor(self.single_ctx, dtype=torch.long) - 1
            starts = self.chunk_starts if self.chunk_starts is not None else np.zeros(0)
            chunk = torch.from_numpy(
                starts.astype(np.int64)[:, None] + np.arange(self.chunk_len)[None, :])
            self._positions = (single.to(device), chunk.to(device))
        return self._positions

    def single_forward(self, q: torch.Tensor, kv_cache: torch.Tensor, scale: float) -> torch.Tensor:
        """The single-token queries (the first ``num_single`` rows of ``q``)."""
        n, num_heads, head_dim = self.num_single, q.shape[1], q.shape[2]
        kv_heads = kv_cache.shape[3]
        assert self.single_blocks is not None  # built whenever num_single > 0
        keys, values = self.gather.gather(kv_cache, self.single_blocks, n, self.single_num_blocks)
        # [n, kv_heads, group, head_dim]: the group's query heads share one KV head.
        qs = q[:n].reshape(n, kv_heads, num_heads // kv_heads, head_dim)
        out = F.scaled_dot_product_attention(
            qs, keys, values, attn_mask=self.single_mask, scale=scale
        )
        return out.reshape(n, num_heads * head_dim)

    def chunk_inputs(
        self, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The chunks' padded queries ``[c, heads, chunk_len, head_dim]`` (the rows of
        ``q`` after the single-token queries) and their keys and values: the chunks' own
        when no chunk has earlier context, else gathered from the cache."""
        n, num_heads, head_dim = self.num_single, q.shape[1], q.shape[2]
        kv_heads = kv.shape[2]
        c, qlen = self.num_chunks, self.chunk_len
        qc = q[n:]
        if self.chunk_index is not None:
            qc = qc.index_select(0, self.chunk_index)
        queries = qc.reshape(c, qlen, num_heads, head_dim).transpose(1, 2)
        if self.chunk_blocks is None:
            kvc = kv[n:]
            if self.chunk_index is not None:
                kvc = kvc.index_select(0, self.chunk_index)
            kvc = kvc.view(c, qlen, 2, kv_heads, head_dim)
            return queries, kvc[:, :, 0].transpose(1, 2), kvc[:, :, 1].transpose(1, 2)
        keys, values = self.gather.gather(kv_cache, self.chunk_blocks, c, self.chunk_num_blocks)
        return queries, keys, values

    def chunk_output(self, out: torch.Tensor) -> torch.Tensor:
        """``[c, heads, chunk_len, head_dim]`` back to the chunks' real rows."""
        c, heads, qlen, head_dim = out.shape
        rows = out.transpose(1, 2).reshape(c * qlen, heads * head_dim)
        if self.chunk_out_index is not None:
            rows = rows.index_select(0, self.chunk_out_index)
        return rows

    def chunk_forward(
        self, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """The multi-token chunks (the rows of ``q`` after the single-token queries)."""
        group = q.shape[1] // kv.shape[2]
        queries, keys, values = self.chunk_inputs(q, kv, kv_cache)
        if self.chunk_blocks is None:
            out = F.scaled_dot_product_attention(
                queries, keys, values, is_causal=True, scale=scale, enable_gqa=group > 1
            )
        else:
            out = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=self.chunk_mask, scale=scale,
                enable_gqa=group > 1,
            )
        return self.chunk_output(out)


class SdpaBackend(AttentionBackend):
    name = "sdpa"

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.gather = GatherBuffer()

    def build(self, batch: StepBatch, singles: bool = True) -> SdpaMetadata:
        """``singles=False``: only the chunks' part (another backend runs the singles)."""
        bs, scratch, dev = batch.block_size, batch.scratch_block, self.device
        single_blocks = single_mask = None
        single_nb = 0
        if singles and batch.single_ctx:
            ctx_lens = batch.single_ctx
            single_nb = cdiv(max(ctx_lens), bs)
            needs = [cdiv(ctx, bs) for ctx in ctx_lens]
            table = padded_table(batch.single_tables, needs, single_nb, scratch)
            single_blocks = torch.tensor(table, dtype=torch.long)
            key_pos = torch.arange(single_nb * bs)
            ctx = torch.tensor(ctx_lens, dtype=torch.long)
            single_mask = (key_pos[None, :] < ctx[:, None])[:, None, None, :]

        n_chunks = batch.num_chunks
        chunk_len = 0
        chunk_index = chunk_out_index = chunk_blocks = chunk_mask = None
        chunk_nb = 0
        if n_chunks:
            lens, starts = batch.chunk_lens, batch.chunk_starts
            chunk_len = int(lens.max())
            if n_chunks > 1 or int(lens[0]) != chunk_len:
                firsts = np.concatenate(([0], np.cumsum(lens)[:-1]))
                q = np.arange(chunk_len, dtype=np.int64)
                index = firsts[:, None] + np.minimum(q[None, :], lens[:, None] - 1)
                chunk_index = torch.from_numpy(index.reshape(-1))
                out_index = np.concatenate(
                    [b * chunk_len + np.arange(n, dtype=np.int64) for b, n in enumerate(lens)]
                )
                chunk_out_index = torch.from_numpy(out_index)
            if starts.any():
                needs = [cdiv(int(s + n), bs) for s, n in zip(starts, lens, strict=True)]
                chunk_nb = max(needs)
                table = padded_table(batch.chunk_tables, needs, chunk_nb, scratch)
                chunk_blocks = torch.tensor(table, dtype=torch.long)
                key_pos = torch.arange(chunk_nb * bs)
                last_visible = torch.from_numpy(starts[:, None] + np.arange(chunk_len)[None, :])
                chunk_mask = (key_pos[None, None, :] <= last_visible[:, :, None])[:, None]

        def to_dev(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(dev, non_blocking=True)

        return SdpaMetadata(
            gather=self.gather,
            slot_mapping=batch.slot_mapping,
            num_single=batch.num_single,
            single_blocks=to_dev(single_blocks),
            single_num_blocks=single_nb,
            single_mask=to_dev(single_mask),
            num_chunks=n_chunks,
            chunk_len=chunk_len,
            chunk_index=to_dev(chunk_index),
            chunk_out_index=to_dev(chunk_out_index),
            chunk_blocks=to_dev(chunk_blocks),
            chunk_num_blocks=chunk_nb,
            chunk_mask=to_dev(chunk_mask),
            single_ctx=batch.single_ctx if singles else [],
            chunk_starts=batch.chunk_starts,
        )
