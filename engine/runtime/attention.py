"""Paged attention in plain torch.

The KV cache of one layer is one tensor ``[num_blocks + 1, block_size, 2, kv_heads,
head_dim]`` (K and V of a slot side by side: one write and one gather per layer); the
last block is scratch: padding slots and padded block-table entries
point at it, never at ``-1`` (which would silently wrap to a real slot). The cache is
zero-initialised so masked-out slots hold finite numbers (0 * NaN would poison SDPA).

A step's tokens are laid out flat: first the single-token queries (decodes, or a
one-token prefill chunk), then the multi-token chunks. Each group is one SDPA call:

* single-token queries gather their blocks, and the query heads of one KV head are
  folded into the query-length axis (no K/V expansion for GQA); the mask hides slots
  past each request's context;
* multi-token chunks are padded to the longest chunk. Without earlier context (a fresh
  prompt) keys are the chunk's own K/V and the mask is plain causal (query and key
  lengths are equal, so top-left alignment is right). With earlier context (a later
  chunk, or a prefix-cache hit) keys come from the cache and the mask is aligned to the
  bottom right: query ``i`` of a chunk starting at position ``s`` sees keys ``0..s+i``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


@dataclass
class AttentionMetadata:
    """Per-step tensors shared by every layer."""

    slot_mapping: torch.Tensor  # [T] cache slot of every token
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


def write_kv(kv_cache: torch.Tensor, kv: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Store this step's ``kv [T, 2, kv_heads, head_dim]`` at its slots."""
    kv_cache.view(-1, *kv.shape[1:]).index_copy_(0, slot_mapping, kv)


def _gather(
    cache: torch.Tensor, blocks: torch.Tensor, n: int, nb: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V ``[n, kv_heads, nb * block_size, head_dim]`` of the blocks of ``n`` requests."""
    _, block_size, _, kv_heads, head_dim = cache.shape
    kv = cache.index_select(0, blocks).view(n, nb * block_size, 2, kv_heads, head_dim)
    return kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)


def paged_attention(
    q: torch.Tensor,
    kv: torch.Tensor,
    kv_cache: torch.Tensor,
    meta: AttentionMetadata,
    scale: float,
) -> torch.Tensor:
    """Attention of ``q [T, heads, head_dim]``; returns ``[T, heads * head_dim]``.

    ``kv [T, 2, kv_heads, head_dim]`` is this step's K and V; it is written to the cache.
    """
    num_heads, head_dim = q.shape[1], q.shape[2]
    kv_heads = kv.shape[2]
    group = num_heads // kv_heads
    write_kv(kv_cache, kv, meta.slot_mapping)
    outputs: list[torch.Tensor] = []

    n = meta.num_single
    if n:
        nb = meta.single_num_blocks
        keys, values = _gather(kv_cache, meta.single_blocks, n, nb)
        # [n, kv_heads, group, head_dim]: the group's query heads share one KV head.
        qs = q[:n].reshape(n, kv_heads, group, head_dim)
        out = F.scaled_dot_product_attention(
            qs, keys, values, attn_mask=meta.single_mask, scale=scale
        )
        outputs.append(out.reshape(n, num_heads * head_dim))

    if meta.num_chunks:
        c, qlen = meta.num_chunks, meta.chunk_len
        qc = q[n:]
        if meta.chunk_index is not None:
            qc = qc.index_select(0, meta.chunk_index)
        queries = qc.reshape(c, qlen, num_heads, head_dim).transpose(1, 2)
        if meta.chunk_blocks is None:
            kvc = kv[n:]
            if meta.chunk_index is not None:
                kvc = kvc.index_select(0, meta.chunk_index)
            kvc = kvc.view(c, qlen, 2, kv_heads, head_dim)
            keys, values = kvc[:, :, 0].transpose(1, 2), kvc[:, :, 1].transpose(1, 2)
            out = F.scaled_dot_product_attention(
                queries, keys, values, is_causal=True, scale=scale, enable_gqa=group > 1
            )
        else:
            nb = meta.chunk_num_blocks
            keys, values = _gather(kv_cache, meta.chunk_blocks, c, nb)
            out = F.scaled_dot_product_attention(
                queries, keys, values, attn_mask=meta.chunk_mask, scale=scale,
                enable_gqa=group > 1,
            )
        out = out.transpose(1, 2).reshape(c * qlen, num_heads * head_dim)
        if meta.chunk_out_index is not None:
            out = out.index_select(0, meta.chunk_out_index)
        outputs.append(out)

    if len(outputs) == 1:
        return outputs[0]
    return torch.cat(outputs, dim=0)
