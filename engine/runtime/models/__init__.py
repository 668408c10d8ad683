"""Model registry: HF ``architectures`` name -> decoder options of its family."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from engine.runtime.loader import ModelLoadError, iter_weights
from engine.runtime.models import llama, qwen2, qwen3
from engine.runtime.models.decoder import DecoderConfig, DecoderModel, DecoderOptions

_FAMILIES = (llama, qwen2, qwen3)

# Each family's ``<Name>ForCausalLM`` also names its pooling checkpoints: the bare model
# (``<Name>Model``, e.g. an embedding model) and ``<Name>ForSequenceClassification``.
POOLING_SUFFIXES = ("Model", "ForSequenceClassification")
REGISTRY: dict[str, Callable[[dict[str, Any]], DecoderOptions]] = {
    name: family.options
    for family in _FAMILIES
    for arch in family.ARCHITECTURES
    for name in (arch, *(arch.removesuffix("ForCausalLM") + s for s in POOLING_SUFFIXES))
}


def supported_architectures() -> list[str]:
    return sorted(REGISTRY)


class UnsupportedArchitectureError(ModelLoadError):
    pass


def resolve_config(hf_config: dict[str, Any]) -> DecoderConfig:
    """The decoder config of a checkpoint; a clear error for unsupported models."""
    archs = hf_config.get("architectures") or []
    if hf_config.get("is_causal") is False or hf_config.get("use_bidirectional_attention"):
        raise UnsupportedArchitectureError(
            "this checkpoint's config.json asks for bidirectional attention (is_causal false "
            "or use_bidirectional_attention), and vrs's decoder attends causally only: its "
            "answers would be wrong")
    for arch in archs:
        if arch in REGISTRY:
            return DecoderConfig.from_hf(hf_config, REGISTRY[arch](hf_config))
    raise UnsupportedArchitectureError(unsupported_message(hf_config))


def unsupported_message(hf_config: dict[str, Any]) -> str:
    """Why a checkpoint cannot be served: its architecture, whether it ships its own code
    (config.json's ``auto_map``, what ``--trust-remote-code`` would run), and what vrs has."""
    archs = hf_config.get("architectures") or []
    found = ", ".join(archs) if archs else "none listed in config.json"
    model_type = hf_config.get("model_type")
    of_type = f", model_type {model_type!r}" if model_type else ""
    message = f"vrs has no implementation of this model's architecture ({found}{of_type})"
    if hf_config.get("auto_map"):
        message += ("; its config.json points at code in the model repository (auto_map), "
                    "and vrs does not run model-repository code, with or without "
                    "--trust-remote-code")
    return (f"{message}. Supported architectures: {', '.join(supported_architectures())}; "
            "and, pooling only, the encoders BERT, RoBERTa, XLM-RoBERTa and ModernBERT "
            "(*Model, *ForMaskedLM, *ForSequenceClassification) "
            "(--mock serves any model with a tokenizer, without its weights)")


def load_model(
    model_dir: Path,
    hf_config: dict[str, Any],
    dtype: torch.dtype,
    device: torch.device,
    max_len: int,
    need_lm_head: bool = True,
    lm_rows: list[int] | None = None,
) -> DecoderModel:
    """Build the decoder for ``model_dir`` and load its safetensors weights."""
    config = resolve_config(hf_config)
    model = DecoderModel(config, dtype, device)
    model.load_weights(dict(iter_weights(model_dir, dtype, device)), need_lm_head, lm_rows)
    model.init_rope(max_len, model_dir)
    return model
