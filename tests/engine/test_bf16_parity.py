"""bf16: the engine against transformers in bf16, and against the fp32 reference.

The tolerance (docs/internals.md, "bf16 parity", says why): a prefill's logits equal
transformers' bf16 logits to within one bf16 step; a greedy run may leave transformers'
bf16 tokens only where transformers' own top-2 margin is at most ``TIE_ULPS`` bf16 steps
(a near-tie that the batch's summation order decides), at least half the sequences
match to the end, and every token the engine picks has an fp32 logit within
``FP32_SLACK`` of fp32's best.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from engine import protocol as p
from tests.engine.engine_kit import (
    bf16_step,
    forward_rows,
    held_out_prompts,
    hf_greedy,
    make_engine,
    new_request,
    run_to_completion,
    tokens_of,
)

pytestmark = pytest.mark.engine

FAMILIES = ("llama", "qwen3")
NEW_TOKENS = 24
TIE_ULPS = 4
# transformers' own bf16 logits are up to 0.06 from its fp32 logits on these models.
FP32_SLACK = 0.125
MATMULS = ("auto", "torch")  # auto: oneDNN where torch has it; torch: F.linear everywhere


@pytest.fixture(scope="module")
def hf_bf16(model_dirs: dict[str, Path]) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM

    return {
        family: AutoModelForCausalLM.from_pretrained(model_dirs[family],
                                                     dtype=torch.bfloat16).eval()
        for family in FAMILIES
    }


@pytest.fixture(scope="module")
def hf_bf16_greedy(hf_bf16: dict[str, Any]) -> dict[str, list[list[int]]]:
    """transformers' bf16 greedy tokens of every held-out prompt, per family."""
    return {
        family: [hf_greedy(model, prompt, NEW_TOKENS) for prompt in held_out_prompts()]
        for family, model in hf_bf16.items()
    }


def last_logits(model: Any, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(torch.tensor([ids])).logits[0].float()


@pytest.mark.parametrize("matmul", MATMULS)
@pytest.mark.parametrize("family", FAMILIES)
def test_prefill_logits_match_transformers_bf16(
    family: str, matmul: str, model_dirs: dict[str, Path], hf_bf16: dict[str, Any],
    hf_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VRS_CPU_MATMUL", matmul)
    engine = make_engine(model_dirs[family], dtype="bfloat16", block_size=4)
    assert engine.model.dtype == torch.bfloat16
    assert engine.runner.kv_caches[0].dtype == torch.bfloat16
    prompt = held_out_prompts()[0] + held_out_prompts()[1]
    (ours,) = forward_rows(engine, [(new_request("a", prompt), len(prompt))])
    assert ours.dtype == torch.float32  # the LM head's bf16 output, upcast for sampling
    theirs = last_logits(hf_bf16[family], prompt)
    step = bf16_step(float(theirs.abs().max()))
    assert float((ours - theirs).abs().max()) <= step
    # And against fp32: no further from it than transformers' bf16 is (plus one step).
    fp32 = last_logits(hf_models[family], prompt)
    assert float((ours - fp32).abs().max()) <= float((theirs - fp32).abs().max()) + step


@pytest.mark.parametrize("matmul", MATMULS)
@pytest.mark.parametrize("family", FAMILIES)
def test_greedy_matches_transformers_bf16_up_to_near_ties(
    family: str, matmul: str, model_dirs: dict[str, Path], hf_bf16: dict[str, Any],
    hf_bf16_greedy: dict[str, list[list[int]]], hf_models: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VRS_CPU_MATMUL", matmul)
    engine = make_engine(model_dirs[family], dtype="bfloat16", block_size=4)
    prompts = held_out_prompts()
    params = p.SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True)
    outputs = run_to_completion(engine, [(f"r{i}", pr, params) for i, pr in enumerate(prompts)])
    exact = 0
    for i, prompt in enumerate(prompts):
        ours = tokens_of(outputs[f"r{i}"])
        theirs = hf_bf16_greedy[family][i]
        assert len(ours) == NEW_TOKENS
        assert ours[0] == theirs[0], f"r{i}: the prefill's token differs"
        pairs = enumerate(zip(ours, theirs, strict=True))
        diverged = next((k for k, (a, b) in pairs if a != b), None)
        if diverged is None:
            exact += 1
        else:
            logits = last_logits(hf_bf16[family], prompt + theirs[:diverged])[-1]
            best = float(logits.max())
            gap = best - float(logits[ours[diverged]])
            assert gap <= TIE_ULPS * bf16_step(best), (
                f"r{i} leaves transformers at token {diverged}: its logit is {gap} below "
                f"the best ({best}), more than {TIE_ULPS} bf16 steps"
            )
        # Against fp32: every token ours picks is (nearly) fp32's best in its context.
        fp32 = last_logits(hf_models[family], prompt + ours)[len(prompt) - 1:-1]
        picked = fp32.gather(1, torch.tensor(ours)[:, None])[:, 0]
        worst = float((fp32.max(dim=1).values - picked).max())
        assert worst <= FP32_SLACK, f"r{i}: a token {worst} below fp32's best"
    assert exact * 2 >= len(prompts), f"only {exact} of {len(prompts)} sequences match"
