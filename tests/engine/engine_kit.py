"""What the engine tests share: tiny random Llama / Qwen2 / Qwen3 models written with
save_pretrained, an engine over one, and the transformers reference.

fp32, vocab 512, two or three layers, with the odd shapes that break engines: GQA
(4 query heads on 2 or 1 KV heads), Qwen3's head_dim != hidden / heads, tied and
untied embeddings, Qwen2's q/k/v biases. The fixtures over them are in conftest.py; the
tests import from here (``tests.engine.engine_kit``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from engine.config import EngineConfig
from engine.runtime.engine import ModelEngine

torch.set_num_threads(min(2, torch.get_num_threads()))

VOCAB = 512
EOS_ID = 2


def _common() -> dict[str, Any]:
    return dict(
        vocab_size=VOCAB, max_position_embeddings=512, rms_norm_eps=1e-6,
        bos_token_id=1, eos_token_id=EOS_ID, pad_token_id=0,
    )


def _llama() -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, tie_word_embeddings=False, rope_theta=10000.0, **_common(),
    )
    return LlamaForCausalLM(cfg)


def _qwen2() -> Any:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(
        hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=1, tie_word_embeddings=True, rope_theta=1000000.0, **_common(),
    )
    return Qwen2ForCausalLM(cfg)


def _qwen3() -> Any:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, tie_word_embeddings=False,
        rope_theta=1000000.0, **_common(),
    )
    return Qwen3ForCausalLM(cfg)


BUILDERS: dict[str, Callable[[], Any]] = {"llama": _llama, "qwen2": _qwen2, "qwen3": _qwen3}


def build_family(family: str, root: Path) -> Path:
    torch.manual_seed(1234)
    model = BUILDERS[family]()
    # Wider weights than HF's 0.02 init (logits spread out, so greedy has no near-ties)
    # and non-trivial norms and biases, so that forgetting one of them shows.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() > 1:
                param.normal_(0.0, 0.08)
            elif name.endswith("bias"):
                param.normal_(0.0, 0.05)
            else:
                param.copy_(1.0 + 0.1 * torch.randn_like(param))
    model = model.eval()
    path = root / family
    model.save_pretrained(path)
    return path


def make_engine(model_dir: Path, **overrides: Any) -> ModelEngine:
    # Eager unless a test asks otherwise: only tests/engine/test_compile.py pays for compiles.
    settings: dict[str, Any] = dict(model=str(model_dir), device="cpu", dtype="float32",
                                    enforce_eager=True)
    settings.update(overrides)
    return ModelEngine.from_config(EngineConfig(**settings))


def run_to_completion(
    engine: ModelEngine,
    requests: list[tuple[str, list[int], Any]],
    max_steps: int = 100_000,
) -> dict[str, list[Any]]:
    """Add ``(request_id, prompt, SamplingParams)`` requests, step until done.

    Returns every EngineCoreOutput per request id, in order.
    """
    from engine import protocol as p

    outputs: dict[str, list[Any]] = {rid: [] for rid, _, _ in requests}
    for rid, prompt, params in requests:
        for out in engine.add_request(p.EngineCoreRequest(rid, prompt, params, 0.0)):
            outputs[out.request_id].append(out)
    steps = 0
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id].append(out)
        steps += 1
        assert steps < max_steps, "engine made no progress"
    return outputs


def tokens_of(outputs: list[Any]) -> list[int]:
    return [t for out in outputs for t in out.new_token_ids]


def hf_greedy(hf_model: Any, prompt: list[int], max_new_tokens: int) -> list[int]:
    """transformers generate(), greedy, EOS disabled: the reference tokens."""
    from transformers import GenerationConfig

    config = GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0
    )
    with torch.inference_mode():
        out = hf_model.generate(torch.tensor([prompt]), generation_config=config)
    return out[0, len(prompt):].tolist()


def kv_bytes_per_block(model_dir: Path, block_size: int) -> int:
    """Budget bytes of one KV block of ``model_dir`` in fp32 (to size tiny caches in
    tests): times the copies the CPU's attention backend keeps of each token's K/V."""
    import json

    from engine.runtime.attention.selection import select_backend

    copies = select_backend(torch.device("cpu"), enforce_eager=True).kv_copies

    cfg = json.loads((model_dir / "config.json").read_text())
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    kv_heads = cfg.get("num_key_value_heads") or heads
    return 2 * cfg["num_hidden_layers"] * block_size * kv_heads * head_dim * 4 * copies
