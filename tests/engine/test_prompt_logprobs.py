"""Prompt logprobs against transformers: short prompts, chunked prefill, prefix cache,
preemption; queue_time / prefill_time on exactly the first output, decode_time on the
last."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from engine import protocol as p
from tests.engine.engine_kit import (
    hf_greedy,
    kv_bytes_per_block,
    make_engine,
    run_to_completion,
    tokens_of,
)

pytestmark = pytest.mark.engine

TOL = 1e-4


def hf_prompt_logprobs(hf_model: Any, prompt: list[int]) -> torch.Tensor:
    """log_softmax (float32) of transformers' logits at every prompt position."""
    with torch.inference_mode():
        logits = hf_model(torch.tensor([prompt])).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


def assert_matches(
    entries: list[p.TokenLogprobs], hf_model: Any, prompt: list[int], k: int
) -> None:
    reference = hf_prompt_logprobs(hf_model, prompt)
    assert len(entries) == len(prompt) - 1
    for i, entry in enumerate(entries):
        row = reference[i]
        token = prompt[i + 1]
        assert entry.token_id == token, i
        assert abs(entry.logprob - float(row[token])) < TOL, (i, entry.logprob, float(row[token]))
        assert entry.rank == int((row > row[token]).sum()) + 1, i
        top = torch.topk(row, k)
        assert entry.top_token_ids == top.indices.tolist(), i
        assert len(entry.top_logprobs) == k
        for got, want in zip(entry.top_logprobs, top.values.tolist(), strict=True):
            assert abs(got - want) < TOL, i


def params(max_tokens: int = 3, **extra: Any) -> p.SamplingParams:
    return p.SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **extra)


def first_with_prompt_logprobs(outputs: list[p.EngineCoreOutput]) -> list[p.TokenLogprobs]:
    """The prompt logprobs, checking they came once, with the first output."""
    assert outputs[0].prompt_logprobs is not None
    assert all(out.prompt_logprobs is None for out in outputs[1:])
    return outputs[0].prompt_logprobs


def test_short_prompt(family: str, model_dirs: dict[str, Path], hf_models: dict[str, Any]) -> None:
    engine = make_engine(model_dirs[family], block_size=4)
    prompt = [1, 17, 300, 42, 9, 255, 8, 101, 77, 5, 460]
    plain = [20, 21, 22, 23, 24, 25, 26]
    outputs = run_to_completion(
        engine,
        [
            ("plp", prompt, params(4, prompt_logprobs=5)),
            ("plain", plain, params(4)),
        ],
    )
    assert_matches(first_with_prompt_logprobs(outputs["plp"]), hf_models[family], prompt, 5)
    assert all(out.prompt_logprobs is None for out in outputs["plain"])
    # Asking for prompt logprobs changes no generated token, of the request or its batch.
    assert tokens_of(outputs["plp"]) == hf_greedy(hf_models[family], prompt, 4)
    assert tokens_of(outputs["plain"]) == hf_greedy(hf_models[family], plain, 4)


def test_prompt_longer_than_the_token_budget(
    model_dirs: dict[str, Path], hf_models: dict[str, Any]
) -> None:
    engine = make_engine(model_dirs["qwen3"], block_size=4, max_num_batched_tokens=16)
    prompt = [(i * 37 + 11) % 511 + 1 for i in range(61)]  # 4 chunks of <= 16 tokens
    other = [(i * 13 + 3) % 511 + 1 for i in range(23)]
    outputs = run_to_completion(
        engine,
        [
            ("long", prompt, params(3, prompt_logprobs=20)),
            ("other", other, params(3, prompt_logprobs=0)),
        ],
    )
    assert_matches(first_with_prompt_logprobs(outputs["long"]), hf_models["qwen3"], prompt, 20)
    entries = first_with_prompt_logprobs(outputs["other"])
    assert_matches(entries, hf_models["qwen3"], other, 0)
    assert all(e.top_token_ids == [] and e.top_logprobs == [] for e in entries)
    assert tokens_of(outputs["long"]) == hf_greedy(hf_models["qwen3"], prompt, 3)


@pytest.mark.parametrize("budget", [1, 5])
def test_tiny_budgets_mix_single_tokens_and_chunks(
    model_dirs: dict[str, Path], hf_models: dict[str, Any], budget: int
) -> None:
    """Budget 1: every prompt token is a one-token query; budget 5: one step holds parts
    of several prompts (spans of different requests and sizes side by side)."""
    engine = make_engine(model_dirs["qwen2"], block_size=4, max_num_batched_tokens=budget)
    prompts = {f"r{i}": [(i * 97 + j * 5) % 511 + 1 for j in range(3 + 4 * i)] for i in range(3)}
    outputs = run_to_completion(
        engine,
        [
            (rid, prompt, params(2, prompt_logprobs=i))
            for i, (rid, prompt) in enumerate(prompts.items())
        ],
    )
    for i, (rid, prompt) in enumerate(prompts.items()):
        assert_matches(first_with_prompt_logprobs(outputs[rid]), hf_models["qwen2"], prompt, i)


def test_shared_cached_prefix_is_recomputed(
    model_dirs: dict[str, Path], hf_models: dict[str, Any]
) -> None:
    engine = make_engine(model_dirs["llama"], block_size=4)
    prefix = [(i * 29 + 7) % 511 + 1 for i in range(24)]
    warm = run_to_completion(engine, [("warm", prefix + [400, 401], params(2))])
    assert all(out.prompt_logprobs is None for out in warm["warm"])
    prompt = prefix + [33, 44, 55]
    outputs = run_to_completion(engine, [("plp", prompt, params(2, prompt_logprobs=3))])
    assert outputs["plp"][0].num_cached_tokens == 0  # no cache hit: every position computed
    assert_matches(first_with_prompt_logprobs(outputs["plp"]), hf_models["llama"], prompt, 3)
    # The cache still serves requests without prompt logprobs.
    again = run_to_completion(engine, [("again", prompt, params(2))])
    assert again["again"][0].num_cached_tokens == 24


def test_one_prompt_token_and_refusals(model_dirs: dict[str, Path]) -> None:
    engine = make_engine(model_dirs["qwen2"])
    outputs = run_to_completion(engine, [("one", [7], params(2, prompt_logprobs=4))])
    assert outputs["one"][0].prompt_logprobs == []
    for bad in (21, -1):
        refused = engine.add_request(
            p.EngineCoreRequest("bad", [7, 8], params(2, prompt_logprobs=bad), 0.0)
        )
        assert refused[0].finish_reason == "error"
        assert f"prompt_logprobs={bad}" in refused[0].error_message


def test_preemption_does_not_resend(
    model_dirs: dict[str, Path], hf_models: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests that outgrow a tiny cache get preempted and recomputed, one in the middle
    of its prefill and one after its first output: each sends its prompt logprobs once,
    and they still match."""
    model_dir = model_dirs["qwen3"]
    engine = make_engine(
        model_dir,
        block_size=4,
        max_num_batched_tokens=8,
        kv_cache_memory_bytes=kv_bytes_per_block(model_dir, 4) * 15,  # 14 blocks
    )
    preempted: list[tuple[int, int | None]] = []  # (outputs so far, prompt entries so far)
    preempt = engine.scheduler._preempt

    def spy(request: Any) -> None:
        gathered = request.prompt_logprobs
        preempted.append((request.num_output_tokens, None if gathered is None else len(gathered)))
        preempt(request)

    monkeypatch.setattr(engine.scheduler, "_preempt", spy)
    prompts = {f"r{i}": [(i * 50 + j * 7) % 511 + 1 for j in range(10 + i)] for i in range(4)}
    outputs = run_to_completion(
        engine, [(rid, prompt, params(12, prompt_logprobs=2)) for rid, prompt in prompts.items()]
    )
    assert any(out == 0 and gathered for out, gathered in preempted), preempted
    assert any(out > 0 and gathered is None for out, gathered in preempted), preempted
    for rid, prompt in prompts.items():
        assert_matches(first_with_prompt_logprobs(outputs[rid]), hf_models["qwen3"], prompt, 2)
        assert tokens_of(outputs[rid]) == hf_greedy(hf_models["qwen3"], prompt, 12)


@pytest.mark.parametrize("budget", [2048, 8])
def test_queue_and_prefill_time_on_exactly_the_first_output(
    model_dirs: dict[str, Path], budget: int
) -> None:
    engine = make_engine(
        model_dirs["qwen2"], block_size=4, max_num_batched_tokens=budget, max_num_seqs=2
    )
    requests = [(f"r{i}", list(range(10 + i, 30 + i)), params(4)) for i in range(4)]
    outputs = run_to_completion(engine, requests)
    for rid, _, _ in requests:
        first, rest = outputs[rid][0], outputs[rid][1:]
        assert first.new_token_ids and len(rest) == 3
        assert first.queue_time is not None and first.queue_time >= 0.0
        assert first.prefill_time is not None and first.prefill_time >= 0.0
        assert all(out.queue_time is None and out.prefill_time is None for out in rest)
        assert rest[-1].finish_reason is not None and rest[-1].decode_time is not None
        assert rest[-1].decode_time >= 0.0, "decode time with the final output"
        assert all(out.decode_time is None for out in [first, *rest[:-1]])
    # Two sequence slots: the last two requests waited for the first two to finish.
    assert outputs["r3"][0].queue_time > outputs["r0"][0].queue_time


def test_bfloat16_model_gives_float32_logprobs(
    model_dirs: dict[str, Path], hf_models: dict[str, Any]
) -> None:
    """A bf16 engine upcasts its logits: the log-softmax is float32, close to fp32's."""
    engine = make_engine(model_dirs["qwen3"], dtype="bfloat16", block_size=4)
    prompt = [(i * 41 + 9) % 511 + 1 for i in range(30)]
    outputs = run_to_completion(engine, [("bf16", prompt, params(2, prompt_logprobs=3))])
    entries = first_with_prompt_logprobs(outputs["bf16"])
    reference = hf_prompt_logprobs(hf_models["qwen3"], prompt)
    assert len(entries) == len(prompt) - 1
    for i, entry in enumerate(entries):
        assert abs(entry.logprob - float(reference[i, prompt[i + 1]])) < 0.1, i
        assert len(entry.top_token_ids) == 3 and entry.top_logprobs == sorted(
            entry.top_logprobs, reverse=True
        )
