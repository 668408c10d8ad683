"""Qwen3: RMSNorm over each head of q and k before RoPE; head_dim set explicitly."""

from __future__ import annotations

from typing import Any

from engine.runtime.models.decoder import DecoderOptions

ARCHITECTURES = ("Qwen3ForCausalLM",)


def options(config: dict[str, Any]) -> DecoderOptions:
    attention_bias = bool(config.get("attention_bias", False))
    return DecoderOptions(
        qkv_bias=attention_bias, o_bias=attention_bias, mlp_bias=False, qk_norm=True
    )
