"""Llama (and Llama-shaped checkpoints): optional attention / MLP biases, no q/k norm."""

from __future__ import annotations

from typing import Any

from engine.runtime.models.decoder import DecoderOptions

ARCHITECTURES = ("LlamaForCausalLM",)


def options(config: dict[str, Any]) -> DecoderOptions:
    attention_bias = bool(config.get("attention_bias", False))
    return DecoderOptions(
        qkv_bias=attention_bias,
        o_bias=attention_bias,
        mlp_bias=bool(config.get("mlp_bias", False)),
        qk_norm=False,
    )
