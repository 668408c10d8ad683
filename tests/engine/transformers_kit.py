"""Tiny random checkpoints of families vrs has no decoder for: what the transformers
backend (engine/runtime/models/transformers_model.py) is checked on.

Each is built from transformers' own config class (fp32, vocab 512, hidden 64, two
layers, like engine_kit.py's), with the feature that family brings to attention or to
the logits set so that the prompts of the tests exercise it: sliding windows smaller
than the prompts, attention and final-logit soft-capping, attention sinks, mixtures of
experts, logit scales, layers without RoPE, custom attention scalings. Weights are wide
(normal(0, 0.08)) and norms non-trivial (1 + 0.1·randn), so that greedy decoding has
no near-ties and forgetting any part of a layer shows; ``SCALES`` widens the families
whose outputs would otherwise repeat one token.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from tests.engine.engine_kit import EOS_ID, VOCAB

WINDOW = 8  # the sliding window: every pressure prompt but the shortest exceeds it


def _common(**overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = dict(
        vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
        bos_token_id=1, eos_token_id=EOS_ID, pad_token_id=0, tie_word_embeddings=False,
    )
    settings.update(overrides)
    return settings


def _config(name: str, **overrides: Any) -> Any:
    import transformers

    return getattr(transformers, name)(**_common(**overrides))


SLIDING_FULL = ["sliding_attention", "full_attention"]

# family -> (what it exercises, its config)
FAMILIES: dict[str, tuple[str, Callable[[], Any]]] = {
    "mistral": ("sliding window on every layer", lambda: _config(
        "MistralConfig", sliding_window=WINDOW)),
    "mixtral": ("sparse MoE (top-2 of 4 experts), sliding window", lambda: _config(
        "MixtralConfig", num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW)),
    "gemma2": ("attention and final-logit soft-capping, alternating sliding window, "
               "query_pre_attn_scalar", lambda: _config(
        "Gemma2Config", head_dim=16, query_pre_attn_scalar=24, sliding_window=WINDOW,
        attn_logit_softcapping=2.0, final_logit_softcapping=8.0, layer_types=SLIDING_FULL)),
    "gemma3_text": ("mixed sliding/global layers with their own RoPE bases, "
                    "query_pre_attn_scalar, q/k norms", lambda: _config(
        "Gemma3TextConfig", head_dim=16, query_pre_attn_scalar=24, sliding_window=WINDOW,
        layer_types=SLIDING_FULL)),
    "phi3": ("fused qkv and gate_up projections, partial RoPE", lambda: _config(
        "Phi3Config", partial_rotary_factor=0.5, pad_token_id=0)),
    "olmo2": ("q/k norms over all heads, post-norms, one KV head", lambda: _config(
        "Olmo2Config", num_key_value_heads=1)),
    "granite": ("embedding, attention, residual multipliers and logits_scaling",
                lambda: _config("GraniteConfig", embedding_multiplier=4.0,
                                attention_multiplier=0.2, residual_multiplier=0.6,
                                logits_scaling=0.5)),
    "smollm3": ("layers without RoPE (no_rope_layers)", lambda: _config(
        "SmolLM3Config", no_rope_layers=[1, 0], no_rope_layer_interval=2)),
    "glm4": ("partial RoPE, post-attention and post-MLP norms", lambda: _config(
        "Glm4Config", head_dim=16, partial_rotary_factor=0.5)),
    "cohere": ("parallel attention/MLP, logit_scale, LayerNorm", lambda: _config(
        "CohereConfig", logit_scale=0.5, tie_word_embeddings=True)),
    "cohere2": ("sliding window on 3 of 4 layers without RoPE on the global one, "
                "logit_scale", lambda: _config(
        "Cohere2Config", num_hidden_layers=4, sliding_window=WINDOW,
        layer_types=["sliding_attention"] * 3 + ["full_attention"], logit_scale=0.5,
        tie_word_embeddings=True)),
    "qwen3_moe": ("sparse MoE (top-2 of 4 experts), q/k norms", lambda: _config(
        "Qwen3MoeConfig", head_dim=16, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=64, decoder_sparse_step=1, norm_topk_prob=True)),
    "gpt_oss": ("attention sinks, alternating sliding window, MoE with biases, YaRN",
                lambda: _config(
        "GptOssConfig", head_dim=16, num_local_experts=4, num_experts_per_tok=2,
        sliding_window=WINDOW, layer_types=SLIDING_FULL,
        rope_parameters=dict(rope_type="yarn", rope_theta=150000.0, factor=2.0,
                             original_max_position_embeddings=1024, beta_fast=32.0,
                             beta_slow=1.0, truncate=False))),
    "starcoder2": ("LayerNorm, biases, sliding window", lambda: _config(
        "Starcoder2Config", sliding_window=WINDOW, use_bias=True)),
    "stablelm": ("partial RoPE, q/k/v biases, LayerNorm", lambda: _config(
        "StableLmConfig", partial_rotary_factor=0.25, use_qkv_bias=True)),
    "phi": ("parallel attention/MLP, partial RoPE, dense with biases, no GQA",
            lambda: _config("PhiConfig", partial_rotary_factor=0.5, num_key_value_heads=4)),
    "granitemoe": ("MoE with Granite's multipliers and logits_scaling", lambda: _config(
        "GraniteMoeConfig", num_local_experts=4, num_experts_per_tok=2,
        embedding_multiplier=4.0, attention_multiplier=0.2, residual_multiplier=0.6,
        logits_scaling=0.5)),
}

# What the backend's probe must see in each family's layers beyond plain causal softmax
# (``TransformersModel.feature_summary``); a family not named: nothing.
ATTENTION: dict[str, str] = {
    "mistral": f"sliding window {WINDOW} (layers 0, 1)",
    "mixtral": f"sliding window {WINDOW} (layers 0, 1)",
    "gemma2": f"sliding window {WINDOW}, logit soft-cap 2 (layers 0); logit soft-cap 2 (layers 1)",
    "gemma3_text": f"sliding window {WINDOW} (layers 0)",
    "cohere2": f"sliding window {WINDOW} (layers 0, 1, 2)",
    "gpt_oss": f"sliding window {WINDOW}, attention sinks (layers 0); attention sinks (layers 1)",
    "starcoder2": f"sliding window {WINDOW} (layers 0, 1)",
}

# Standard deviation of the matrices, per family (default 0.08).
SCALES: dict[str, float] = {"cohere": 0.2, "cohere2": 0.2, "glm4": 0.2, "stablelm": 0.12}


def build(family: str, root: Path) -> Path:
    """Write ``family``'s tiny checkpoint to ``root / family``; its path."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(4321)
    model = AutoModelForCausalLM.from_config(FAMILIES[family][1](), dtype=torch.float32)
    std = SCALES.get(family, 0.08)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() > 1:
                param.normal_(0.0, std)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.05)
            else:
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
    path = root / family
    model.eval().save_pretrained(path)
    return path
