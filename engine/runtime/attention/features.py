"""What a layer may ask of attention beyond the plain causal softmax, and the math of it.

Models built by the transformers backend (engine/runtime/models/transformers_model.py)
declare per layer: a sliding window (the key ``j`` is seen by the query at position
``i`` when ``i - window < j <= i``, transformers' ``sliding_window_overlay``), logit
soft-capping (``tanh(s / cap) * cap`` before the mask, Gemma 2's), and attention sinks
(one learned logit per head that joins the softmax's denominator and is then dropped,
gpt-oss's). A custom scaling needs nothing here: every backend takes the scale.

``attend`` computes such a layer exactly, in float32, over keys the paged backend has
gathered; ``SdpaMetadata.forward_features`` calls it for both kinds of query group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# The logit of a hidden key: finite, so that a row with no visible key (a padding row,
# dropped afterwards) gives finite numbers instead of NaN.
_HIDDEN = torch.finfo(torch.float32).min


@dataclass(frozen=True)
class LayerFeatures:
    """One layer's attention beyond causal softmax; all None: plain."""

    sliding_window: int | None = None
    softcap: float | None = None
    sinks: torch.Tensor | None = None  # [heads] logits

    @property
    def plain(self) -> bool:
        return self.sliding_window is None and self.softcap is None and self.sinks is None

    def describe(self) -> str:
        parts = []
        if self.sliding_window is not None:
            parts.append(f"sliding window {self.sliding_window}")
        if self.softcap is not None:
            parts.append(f"logit soft-cap {self.softcap:g}")
        if self.sinks is not None:
            parts.append("attention sinks")
        return ", ".join(parts) or "plain"


PLAIN = LayerFeatures()


def visible(query_pos: torch.Tensor, num_keys: int, window: int | None) -> torch.Tensor:
    """``[B, 1, Q, L]`` bool: which of ``L`` keys (at positions ``0..L-1``) each query at
    ``query_pos [B, Q]`` sees: causal, and within the window if there is one."""
    key_pos = torch.arange(num_keys, device=query_pos.device)
    q = query_pos[:, :, None]
    seen = key_pos[None, None, :] <= q
    if window is not None:
        seen &= key_pos[None, None, :] > q - window
    return seen[:, None]


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    seen: torch.Tensor,
    scale: float,
    features: LayerFeatures,
) -> torch.Tensor:
    """``q [B, H, Q, D]`` over ``k, v [B, KVH, L, D]`` where ``seen [B, 1, Q, L]``;
    returns ``[B, H, Q, D]`` in ``v``'s dtype."""
    heads, kv_heads = q.shape[1], k.shape[1]
    if heads != kv_heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    if features.softcap is not None:
        scores = torch.tanh(scores / features.softcap) * features.softcap
    scores = scores.masked_fill(~seen, _HIDDEN)
    if features.sinks is not None:
        batch, _, queries, _ = scores.shape
        sink = features.sinks.float().view(1, heads, 1, 1).expand(batch, heads, queries, 1)
        probs = torch.softmax(torch.cat((scores, sink), dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v.float()).to(v.dtype)
