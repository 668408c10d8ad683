"""Model registry: HF ``architectures`` name -> decoder options of its family, and which
implementation serves a checkpoint (``--model-impl``): vrs's own decoder, or the
transformers backend for every other decoder-only family transformers ships."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from engine.runtime.loader import ModelLoadError, iter_weights
from engine.runtime.models import llama, qwen2, qwen3
from engine.runtime.models.base import Model
from engine.runtime.models.decoder import DecoderConfig, DecoderModel, DecoderOptions
from engine.runtime.models.transformers_support import transformers_refusal

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


def _refuse_bidirectional(hf_config: dict[str, Any]) -> None:
    if hf_config.get("is_causal") is False or hf_config.get("use_bidirectional_attention"):
        raise UnsupportedArchitectureError(
            "this checkpoint's config.json asks for bidirectional attention (is_causal false "
            "or use_bidirectional_attention), and vrs's decoder attends causally only: its "
            "answers would be wrong")


def pick_impl(hf_config: dict[str, Any], wanted: str) -> str:
    """``vrs`` or ``transformers``: which implementation serves this checkpoint under
    ``--model-impl wanted``; a clear error when none can."""
    _refuse_bidirectional(hf_config)
    own = any(arch in REGISTRY for arch in hf_config.get("architectures") or [])
    if wanted == "vrs" or (wanted == "auto" and own):
        resolve_config(hf_config)
        return "vrs"
    refusal = transformers_refusal(hf_config)
    if refusal is None:
        return "transformers"
    if wanted == "transformers":
        raise UnsupportedArchitectureError(
            f"--model-impl transformers cannot serve this model: {refusal}")
    raise UnsupportedArchitectureError(f"{unsupported_message(hf_config)}. The transformers "
                                       f"backend cannot serve it either: {refusal}")


def max_positions(hf_config: dict[str, Any]) -> int:
    """The model's own length limit (``max_position_embeddings``, else 2048)."""
    text = hf_config.get("text_config") or hf_config
    return int(text.get("max_position_embeddings") or 2048)


def resolve_config(hf_config: dict[str, Any]) -> DecoderConfig:
    """The decoder config of a checkpoint; a clear error for unsupported models."""
    archs = hf_config.get("architectures") or []
    _refuse_bidirectional(hf_config)
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
    return (f"{message}. vrs's own decoder serves {', '.join(supported_architectures())}; "
            "the transformers backend (--model-impl auto or transformers) every text "
            "decoder-only causal LM transformers ships; "
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
    impl: str = "vrs",
) -> Model:
    """Build the model for ``model_dir`` (``impl`` from ``pick_impl``) and load its
    safetensors weights."""
    if impl == "transformers":
        from engine.runtime.models.transformers_model import TransformersModel

        return TransformersModel(model_dir, hf_config, dtype, device)
    config = resolve_config(hf_config)
    model = DecoderModel(config, dtype, device)
    model.load_weights(dict(iter_weights(model_dir, dtype, device)), need_lm_head, lm_rows)
    model.init_rope(max_len, model_dir)
    return model
