"""Which checkpoints the transformers backend serves, and the class it builds them with.

A checkpoint is served when its ``architectures`` entry is a decoder-only causal LM that
transformers itself ships (a value of its ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES``), for
text. Refused, with the reason: an architecture transformers lacks (code from the model
repository, ``auto_map``, is never run), encoder-only and encoder-decoder models, and
multimodal ones.
"""

from __future__ import annotations

from typing import Any

from engine.runtime.loader import ModelLoadError

_MULTIMODAL_KEYS = ("vision_config", "audio_config", "vision_tower", "speech_config")


def _mappings() -> tuple[set[str], set[str], set[str]]:
    from transformers.models.auto import modeling_auto as auto

    causal = set(auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    masked = set(auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES)
    multimodal = set(auto.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES.values())
    return causal, masked, multimodal


def transformers_refusal(hf_config: dict[str, Any]) -> str | None:
    """Why the transformers backend cannot serve this checkpoint; None: it can."""
    archs = hf_config.get("architectures") or []
    if not archs:
        return "config.json lists no architectures"
    arch = archs[0]
    causal, masked, multimodal = _mappings()
    model_type = str(hf_config.get("model_type", ""))
    if hf_config.get("is_encoder_decoder"):
        return f"{arch} is an encoder-decoder model; the backend serves decoder-only models"
    if any(key in hf_config for key in _MULTIMODAL_KEYS) or arch in multimodal:
        return f"{arch} is multimodal; the backend serves text decoders only"
    if arch not in causal:
        if model_type in masked or arch.endswith(("ForMaskedLM", "Model")):
            return f"{arch} is encoder-only or a bare model, not a causal LM"
        return (f"transformers ships no causal LM named {arch}"
                + ("; the checkpoint's own code (auto_map) is never run"
                   if hf_config.get("auto_map") else ""))
    if model_type in masked:
        return f"{arch} is an encoder-only family ({model_type}) run as a decoder"
    return None


def model_class(hf_config: dict[str, Any]) -> Any:
    """transformers' class for this checkpoint; ModelLoadError with the reason."""
    refusal = transformers_refusal(hf_config)
    if refusal is not None:
        raise ModelLoadError(f"the transformers backend cannot serve this model: {refusal}")
    import transformers

    arch = hf_config["architectures"][0]
    cls = getattr(transformers, arch, None)
    if cls is None:
        raise ModelLoadError(f"transformers {transformers.__version__} has no class {arch}")
    expected = getattr(cls.config_class, "model_type", None)
    model_type = hf_config.get("model_type")
    if expected and model_type != expected:
        raise ModelLoadError(f"config.json's model_type {model_type!r} is not {arch}'s "
                             f"({expected!r}): the checkpoint does not fit the architecture")
    return cls
