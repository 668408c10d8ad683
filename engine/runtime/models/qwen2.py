"""Qwen2: biases on the q/k/v projections (not on o_proj), no q/k norm."""

from __future__ import annotations

from typing import Any

from engine.runtime.models.decoder import DecoderOptions

ARCHITECTURES = ("Qwen2ForCausalLM",)


def options(config: dict[str, Any]) -> DecoderOptions:
    return DecoderOptions(qkv_bias=True, o_bias=False, mlp_bias=False, qk_norm=False)
