"""What the engine tests share: tiny random Llama / Qwen2 / Qwen3 models written with
save_pretrained, an engine over one, and the transformers reference.

fp32, vocab 512, two or three layers, with the odd shapes that break engines: GQA
(4 query heads on 2 or 1 KV heads), Qwen3's head_dim != hidden / heads, tied and
untied embeddings, Qwen2's q/k/v biases. The fixtures over them are in conftest.py; the
tests import from here (``tests.engine.engine_kit``), with what the parity tests share:
the pressure workload and engine, per-row logits of one step, the chunked-prefill
logits check and the bf16 helpers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from engine import protocol as p
from engine.config import EngineConfig
from engine.runtime.engine import ModelEngine
from engine.runtime.request import Request

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
    # generate() fills an unset eos_token_id from the model's own generation config.
    saved, hf_model.generation_config.eos_token_id = hf_model.generation_config.eos_token_id, None
    try:
        with torch.inference_mode():
            out = hf_model.generate(torch.tensor([prompt]), generation_config=config)
    finally:
        hf_model.generation_config.eos_token_id = saved
    tokens: list[int] = out[0, len(prompt):].tolist()
    assert len(tokens) == max_new_tokens, "transformers stopped early"
    return tokens


def kv_bytes_per_block(model_dir: Path, block_size: int, features: str | None = None) -> int:
    """Budget bytes of one KV block of ``model_dir`` in fp32 (to size tiny caches in
    tests): times the copies the CPU's attention backend keeps of each token's K/V
    (``features``: what the layers ask beyond plain attention, which picks the backend)."""
    import json

    from engine.runtime.attention.selection import select_backend

    copies = select_backend(torch.device("cpu"), enforce_eager=True, features=features).kv_copies

    cfg = json.loads((model_dir / "config.json").read_text())
    heads = cfg["num_attention_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    kv_heads = cfg.get("num_key_value_heads") or heads
    return 2 * cfg["num_hidden_layers"] * block_size * kv_heads * head_dim * 4 * copies


def hf_logits(hf_model: Any, prompt: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return hf_model(torch.tensor([prompt])).logits[0].float()


def forward_rows(engine: ModelEngine, batch: list[tuple[Request, int]]) -> list[torch.Tensor]:
    """Run one step of ``batch`` through the runner; logits of every scheduled token."""
    for req, n in batch:
        assert engine.kv_cache.allocate_slots(req, n)
    with torch.inference_mode():
        inputs = engine.runner.prepare([r for r, _ in batch], [n for _, n in batch])
        hidden = engine.model.forward(
            inputs.input_ids, inputs.positions, inputs.meta, engine.runner.kv_caches
        )
        logits = engine.model.compute_logits(hidden)
    # The runner lays out single-token queries first, then the chunks.
    order = [i for i, (_, n) in enumerate(batch) if n == 1]
    order += [i for i, (_, n) in enumerate(batch) if n > 1]
    rows: dict[int, torch.Tensor] = {}
    offset = 0
    for i in order:
        n = batch[i][1]
        rows[i] = logits[offset:offset + n]
        offset += n
    for req, n in batch:
        req.num_computed_tokens += n
    return [rows[i] for i in range(len(batch))]


def new_request(rid: str, prompt: list[int]) -> Request:
    return Request(rid, prompt, p.SamplingParams(max_tokens=1), 0.0, frozenset())


def pressure_workload(seed: int) -> list[tuple[str, list[int], p.SamplingParams]]:
    """Prompts of many lengths, some sharing long prefixes, one repeated exactly."""
    rng = random.Random(seed)
    shared = [rng.randrange(3, 512) for _ in range(24)]
    prompts = [[rng.randrange(3, 512) for _ in range(n)] for n in (3, 7, 12, 19, 26, 33, 41, 50)]
    prompts.append(shared + [rng.randrange(3, 512) for _ in range(5)])
    prompts.append(shared + [rng.randrange(3, 512) for _ in range(9)])
    prompts.append(list(prompts[5]))  # an exact repeat: a full hit recomputes one token
    prompts.append(shared[:16])  # exactly 4 blocks
    workload = []
    for i, prompt in enumerate(prompts):
        params = p.SamplingParams(max_tokens=8 + (i * 5) % 9, temperature=0.0, ignore_eos=True)
        workload.append((f"r{i}", prompt, params))
    return workload


def pressure_engine(model_dir: Path, features: str | None = None,
                    **overrides: Any) -> ModelEngine:
    """An engine of 32 KV blocks of 4 tokens, 24 tokens a step (``features``: as in
    ``kv_bytes_per_block``)."""
    settings: dict[str, Any] = dict(
        block_size=4, max_num_batched_tokens=24, max_num_seqs=8,
        # 32 blocks + scratch
        kv_cache_memory_bytes=kv_bytes_per_block(model_dir, 4, features) * 33,
    )
    settings.update(overrides)
    return make_engine(model_dir, **settings)


def check_chunked_logits(engine: ModelEngine, hf_model: Any, atol: float) -> None:
    """Chunks after earlier context (bottom-right causal alignment), mixed with decodes,
    then a prefix-cache style restart: every row's logits against transformers'."""
    rng = random.Random(1)
    a_prompt = [rng.randrange(3, 512) for _ in range(30)]
    b_prompt = [rng.randrange(3, 512) for _ in range(11)]
    a, b = new_request("a", a_prompt), new_request("b", b_prompt)
    a_ref, b_ref = hf_logits(hf_model, a_prompt), hf_logits(hf_model, b_prompt)

    def close(got: torch.Tensor, want: torch.Tensor) -> None:
        torch.testing.assert_close(got, want, atol=atol, rtol=0)

    # Step 1: a's first 5 tokens (not block aligned) and all of b but its last token.
    got_a, got_b = forward_rows(engine, [(a, 5), (b, 10)])
    close(got_a, a_ref[:5])
    close(got_b, b_ref[:10])
    # Step 2: b's last token as a single query next to a 14-token chunk of a.
    got_b, got_a = forward_rows(engine, [(b, 1), (a, 14)])
    close(got_b, b_ref[10:11])
    close(got_a, a_ref[5:19])
    # Step 3: a's rest alone, then a prefix-cache style restart of a from block 4.
    (got_a,) = forward_rows(engine, [(a, 11)])
    close(got_a, a_ref[19:])
    again = new_request("again", a_prompt)
    again.block_ids = list(a.block_ids[:4])  # shares a's first 16 tokens' K/V
    again.num_computed_tokens = 16
    (got,) = forward_rows(engine, [(again, 14)])
    close(got, a_ref[16:])


def bf16_step(value: float) -> float:
    """The spacing of bf16 numbers (8 significant bits) at ``value``."""
    return 2.0 ** (math.floor(math.log2(max(abs(value), 2.0**-126))) - 7)


def held_out_prompts(count: int = 10) -> list[list[int]]:
    rng = random.Random(2024)
    return [[rng.randrange(3, 512) for _ in range(rng.randrange(4, 48))] for _ in range(count)]
