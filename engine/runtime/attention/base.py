"""The attention seam: what a backend is handed each step and what it must provide.

The KV cache of one layer is one tensor ``[num_blocks + 1, block_size, 2, kv_heads,
head_dim]`` (K and V of a slot side by side: one write per layer); the last block is
scratch: padding slots and padded block-table entries point at it, never at ``-1``
(which would silently wrap to a real slot). The cache is zero-initialised so masked-out
slots hold finite numbers (0 * NaN would poison a softmax).

A step's tokens are laid out flat: first the single-token queries (decodes, or a
one-token prefill chunk), then the multi-token chunks, in the order of ``StepBatch``.
``ModelRunner.prepare`` builds the ``StepBatch`` (block tables and lengths, the same
facts FlashInfer's ``plan()`` takes as CSR arrays); the engine's backend turns it into
its own ``AttentionMetadata`` once per step, and every layer calls ``forward``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class StepBatch:
    """The scheduled step as attention sees it (host-side lists, one device tensor)."""

    block_size: int
    scratch_block: int  # the block padding points at
    slot_mapping: torch.Tensor  # [T] cache slot of every token, on the device
    single_ctx: list[int]  # context length (this token included) of each single query
    single_tables: list[list[int]]  # their block ids (at least cdiv(ctx, block_size))
    chunk_starts: np.ndarray  # [C] int64: tokens already in the cache before each chunk
    chunk_lens: np.ndarray  # [C] int64: tokens of each chunk (>= 2)
    chunk_tables: list[list[int]]  # block ids of each chunk's request
    # One identity per single query (its Request), the same object from step to step:
    # what a backend that keeps per-sequence state across steps keys it by.
    single_keys: list[Hashable] = field(default_factory=list)

    @property
    def num_single(self) -> int:
        return len(self.single_ctx)

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_tables)


class AttentionMetadata(ABC):
    """One step's prepared attention, shared by every layer."""

    @abstractmethod
    def forward(
        self, layer: int, q: torch.Tensor, kv: torch.Tensor, kv_cache: torch.Tensor, scale: float
    ) -> torch.Tensor:
        """Attention of ``q [T, heads, head_dim]`` in ``layer`` (whose cache is
        ``kv_cache``); returns ``[T, heads * head_dim]``.

        ``kv [T, 2, kv_heads, head_dim]`` is this step's K and V; it is written to the
        cache first (at ``StepBatch.slot_mapping``).
        """


class AttentionBackend(ABC):
    """Chosen once per engine; builds each step's metadata."""

    name: str
    # Copies of a cached token's K/V the backend may keep (the paged cache is one): the
    # KV budget is split among them (engine/runtime/kv_budget.py).
    kv_copies: int = 1

    @abstractmethod
    def build(self, batch: StepBatch) -> AttentionMetadata:
        """The step's metadata (tensors on the device) from the scheduled batch."""


def write_kv(kv_cache: torch.Tensor, kv: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Store this step's ``kv [T, 2, kv_heads, head_dim]`` at its slots."""
    kv_cache.view(-1, *kv.shape[1:]).index_copy_(0, slot_mapping, kv)
