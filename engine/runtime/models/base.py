"""What the engine asks of a model, whichever implementation runs it.

Two implementations exist: vrs's own decoder (``DecoderModel``, Llama / Qwen2 / Qwen3)
and the transformers backend (``TransformersModel``, every other decoder-only family
transformers ships). The model runner, the KV sizing and the engine use only this.
"""

from __future__ import annotations

from typing import Protocol

import torch

from engine.runtime.attention.base import AttentionMetadata


class ModelShape(Protocol):
    """The sizes the engine allocates by (the paged KV cache holds, per layer, blocks of
    ``num_kv_heads x head_dim`` keys and values)."""

    @property
    def architecture(self) -> str: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    @property
    def num_kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int: ...
    @property
    def max_position_embeddings(self) -> int: ...


class Model(Protocol):
    """A loaded model: its forward over a flat batch of tokens with paged attention."""

    @property
    def config(self) -> ModelShape: ...
    @property
    def dtype(self) -> torch.dtype: ...
    @property
    def device(self) -> torch.device: ...
    @property
    def linear_backend(self) -> str: ...
    @property
    def linear_reason(self) -> str: ...

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        meta: AttentionMetadata,
        kv_caches: list[torch.Tensor],
    ) -> torch.Tensor:
        """Hidden states ``[T, hidden]`` after the final norm."""
        ...

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits ``[rows, vocab]`` of hidden states ``[rows, hidden]``."""
        ...

    def weight_bytes(self) -> int:
        """Bytes of the weights this process holds (its slice under tensor parallel)."""
        ...


def tensor_bytes(tensors: list[torch.Tensor | None]) -> int:
    """Bytes of ``tensors`` (each counted once; None skipped)."""
    seen: dict[int, int] = {}
    for t in tensors:
        if t is not None:
            seen[id(t)] = t.numel() * t.element_size()
    return sum(seen.values())
