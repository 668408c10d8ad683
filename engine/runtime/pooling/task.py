"""What a checkpoint is served for: vLLM's ``--runner`` and ``--convert`` resolved against
config.json (and the sentence-transformers files beside it).

``auto`` pools an encoder-only model (BERT, RoBERTa, XLM-RoBERTa, ModernBERT), a
``*ForSequenceClassification`` or bare ``*Model`` checkpoint, and a decoder that ships a
sentence-transformers ``modules.json`` (Qwen3-Embedding, gte-Qwen2); a ``--convert`` task
pools any model; everything else generates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.runtime.loader import ModelLoadError
from engine.runtime.pooling.encoder import encoder_family

POOLING_SUFFIXES = ("ForSequenceClassification", "Model")
# Causal LMs whose class names end in "Model" all the same (GPT2LMHeadModel, ...).
_LM_HEAD_SUFFIXES = ("LMHeadModel",)


def _pooling_architecture(arch: str) -> bool:
    return arch.endswith(POOLING_SUFFIXES) and not arch.endswith(_LM_HEAD_SUFFIXES)


def pooling_convert(runner: str, convert: str, hf_config: dict[str, Any],
                    model_dir: Path) -> str | None:
    """None: the model generates; else how it pools ("auto", "embed", "classify", "score";
    "auto" lets its config decide). A ModelLoadError for a checkpoint that cannot be
    served as asked."""
    archs = [str(a) for a in hf_config.get("architectures") or []]
    pooling_only = encoder_family(hf_config) is not None or any(_pooling_architecture(a)
                                                                for a in archs)
    if runner == "generate":
        if encoder_family(hf_config) is not None:
            raise ModelLoadError(f"{', '.join(archs)} is an encoder-only model (neither "
                                 "vrs's decoder nor the transformers backend, which serves "
                                 "decoder-only causal LMs, runs it) and cannot generate: "
                                 "serve it with --runner pooling (or auto)")
        if pooling_only:
            raise ModelLoadError(f"{', '.join(archs)} has no language-model head and cannot "
                                 "generate: serve it with --runner pooling (or auto)")
        return None
    if convert in ("embed", "classify", "score"):
        return convert
    if runner == "pooling" or pooling_only or (model_dir / "modules.json").is_file():
        return "auto"
    return None
