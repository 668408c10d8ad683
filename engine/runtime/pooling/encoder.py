"""The encoder-only models (BERT, RoBERTa / XLM-RoBERTa, ModernBERT), run through
transformers' own modeling code: bidirectional attention over a right-padded batch, no
KV cache. ``EncoderModel`` turns a batch of token-id lists into pooled float32 vectors
(embed) or class logits (classify / score).

Which architectures are encoders, their default pooling (vLLM's: CLS for all three) and
their usable length (RoBERTa's positions start after the padding index, so
max_position_embeddings - pad_token_id - 1 tokens fit) are read here.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from engine.runtime.loader import ModelLoadError, read_config, resolve_model_dir
from engine.runtime.models.linear import pack_linears
from engine.runtime.pooling.head import EmbedHead, pool_padded
from engine.runtime.pooling.spec import PoolingSpec

logger = logging.getLogger("vrs.engine")


@dataclass(frozen=True)
class EncoderFamily:
    name: str
    position_offset: bool  # RoBERTa: positions start at pad_token_id + 1
    token_types: bool  # the forward takes token_type_ids
    pooling_layer: bool  # AutoModel takes add_pooling_layer (not needed for embeddings)


FAMILIES = (
    EncoderFamily("bert", False, True, True),
    EncoderFamily("roberta", True, True, True),  # RoBERTa and XLM-RoBERTa
    EncoderFamily("modernbert", False, False, False),
)
_HEADS = ("Model", "ForMaskedLM", "ForSequenceClassification")
ENCODER_ARCHITECTURES = {
    f"{prefix}{head}": family
    for family, prefixes in zip(FAMILIES, (("Bert",), ("Roberta", "XLMRoberta"), ("ModernBert",)),
                                strict=True)
    for prefix in prefixes
    for head in _HEADS
}
DEFAULT_METHOD = "cls"  # vLLM's default pooling for BERT, RoBERTa and ModernBERT


# A config.json without ``architectures`` (older BERT checkpoints): its model_type.
MODEL_TYPES = {"bert": FAMILIES[0], "roberta": FAMILIES[1], "xlm-roberta": FAMILIES[1],
               "modernbert": FAMILIES[2]}


def encoder_family(hf_config: dict[str, Any]) -> EncoderFamily | None:
    """The encoder family of a config.json (by its architectures, else, where it names
    none, its model_type), or None: a decoder."""
    architectures = hf_config.get("architectures") or []
    for architecture in architectures:
        family = ENCODER_ARCHITECTURES.get(str(architecture))
        if family is not None:
            return family
    if not architectures:
        return MODEL_TYPES.get(str(hf_config.get("model_type")))
    return None


def is_encoder_model(model: str) -> bool:
    """Whether the model directory ``model`` holds an encoder-only model this package
    serves (False also where it cannot be read: the decoder engine says why)."""
    try:
        return encoder_family(read_config(resolve_model_dir(model))) is not None
    except ModelLoadError:
        return False


def has_classifier(hf_config: dict[str, Any]) -> bool:
    return any(str(a).endswith("ForSequenceClassification")
               for a in hf_config.get("architectures") or [])


def position_limit(hf_config: dict[str, Any], family: EncoderFamily) -> int:
    """How many tokens the model's position embeddings cover."""
    limit = hf_config.get("max_position_embeddings")
    if not isinstance(limit, int) or limit < 1:
        raise ModelLoadError("config.json has no max_position_embeddings")
    if family.position_offset:
        limit -= int(hf_config.get("pad_token_id") or 0) + 1
    return limit


class EncoderModel:
    """An encoder and its pooling head, on one device, in one dtype."""

    def __init__(self, model_dir: Path, hf_config: dict[str, Any], spec: PoolingSpec,
                 device: torch.device, dtype: torch.dtype) -> None:
        family = encoder_family(hf_config)
        if family is None:
            raise ModelLoadError(f"{model_dir}: not an encoder architecture "
                                 f"({hf_config.get('architectures')})")
        self.family = family
        self.spec = spec
        self.device = device
        self.dtype = dtype
        self.classify = "embed" not in spec.tasks
        if self.classify and not has_classifier(hf_config):
            raise ModelLoadError(f"{', '.join(spec.tasks)} needs a classification head "
                                 "(a *ForSequenceClassification checkpoint); this one is "
                                 f"{', '.join(hf_config.get('architectures') or [])}")
        self.pad_token_id = int(hf_config.get("pad_token_id") or 0)
        self.token_types = family.token_types and int(hf_config.get("type_vocab_size", 0)) > 1
        self.vocab_size = int(hf_config.get("vocab_size", 0))
        start = time.perf_counter()
        self.model = self._load(model_dir, family)
        self.head = EmbedHead(spec, device) if not self.classify else None
        self.matmuls = ": ".join(pack_linears(self.model, device, dtype))
        logger.info("encoder loaded in %.1fs (attention: %s, matmuls: %s, torch threads: %d)",
                    time.perf_counter() - start, self.attention, self.matmuls,
                    torch.get_num_threads())

    def _load(self, model_dir: Path, family: EncoderFamily) -> Any:
        import transformers
        from transformers.utils import logging as hf_logging

        auto = (transformers.AutoModelForSequenceClassification if self.classify
                else transformers.AutoModel)
        kwargs: dict[str, Any] = {"dtype": self.dtype, "output_loading_info": True}
        if not self.classify and family.pooling_layer:
            kwargs["add_pooling_layer"] = False
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity(logging.ERROR)  # its load report: checked below instead
        try:
            try:
                model, info = auto.from_pretrained(model_dir, attn_implementation="sdpa",
                                                   **kwargs)
            except (ValueError, ImportError) as exc:
                logger.info("sdpa attention unavailable (%s); loading with eager attention",
                            exc)
                model, info = auto.from_pretrained(model_dir, attn_implementation="eager",
                                                   **kwargs)
        except OSError as exc:
            raise ModelLoadError(f"{model_dir}: cannot load the encoder: {exc}") from exc
        finally:
            hf_logging.set_verbosity(verbosity)
        # A weight the checkpoint lacks would be random: never serve that.
        missing = sorted({*info.get("missing_keys", ()),
                          *(str(key[0]) if isinstance(key, tuple) else str(key)
                            for key in info.get("mismatched_keys", ()))})
        if missing:
            raise ModelLoadError(f"{model_dir}: the checkpoint lacks weights of "
                                 f"{type(model).__name__} (or their shapes differ): "
                                 f"{', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''}")
        self.attention = str(getattr(model.config, "_attn_implementation", "eager"))
        return model.to(self.device).eval()

    def batch_inputs(self, prompts: list[list[int]],
                     type_starts: list[int | None]) -> dict[str, torch.Tensor]:
        """The right-padded forward inputs of ``prompts``."""
        width = max(len(ids) for ids in prompts)
        rows = [ids + [self.pad_token_id] * (width - len(ids)) for ids in prompts]
        lengths = torch.tensor([len(ids) for ids in prompts])
        positions = torch.arange(width)
        inputs = {
            "input_ids": torch.tensor(rows, dtype=torch.long),
            "attention_mask": (positions[None, :] < lengths[:, None]).to(torch.long),
        }
        if self.token_types:
            starts = torch.tensor([width if s is None else s for s in type_starts])
            inputs["token_type_ids"] = (positions[None, :] >= starts[:, None]).to(torch.long)
        return {name: tensor.to(self.device) for name, tensor in inputs.items()}

    def forward(self, prompts: list[list[int]],
                type_starts: list[int | None]) -> torch.Tensor:
        """embed: the pooled hidden states ``[B, H]``; classify: the logits ``[B, C]``;
        float32 either way. Run under torch.inference_mode."""
        inputs = self.batch_inputs(prompts, type_starts)
        if self.classify:
            return self.model(**inputs).logits.float()  # type: ignore[no-any-return]
        hidden = self.model(**inputs).last_hidden_state
        lengths = inputs["attention_mask"].sum(dim=1)
        return pool_padded(hidden, lengths, self.spec.method)
