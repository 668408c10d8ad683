"""The request fields the engine acts on, on a tiny real model: ``cache_salt`` (salted
prefix-cache hashes), ``thinking_budget`` (the end marker forced exactly at the budget,
over every other rule) and ``priority`` (a preempting engine serves and finishes
everything, the higher priority first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import protocol as p
from engine.runtime.engine import ModelEngine
from tests.engine.engine_kit import kv_bytes_per_block, make_engine, tokens_of

pytestmark = pytest.mark.engine

BLOCK = 4


def greedy(max_tokens: int, **fields: Any) -> p.SamplingParams:
    settings: dict[str, Any] = {"temperature": 0.0, "ignore_eos": True, **fields}
    return p.SamplingParams(max_tokens=max_tokens, **settings)


def run(engine: ModelEngine, requests: list[p.EngineCoreRequest]) -> dict[str, list[Any]]:
    """Add ``requests``, step until done: every output per request id, in order."""
    outputs: dict[str, list[Any]] = {r.request_id: [] for r in requests}
    for request in requests:
        for out in engine.add_request(request):
            outputs[out.request_id].append(out)
    for _ in range(100_000):
        if not engine.has_unfinished_requests():
            return outputs
        for out in engine.step():
            outputs[out.request_id].append(out)
    raise AssertionError("the engine made no progress")


def one(engine: ModelEngine, rid: str, prompt: list[int], params: p.SamplingParams,
        **fields: Any) -> list[Any]:
    return run(engine, [p.EngineCoreRequest(rid, prompt, params, 0.0, **fields)])[rid]


def test_cache_salt_separates_the_prefix_cache(model_dirs: dict[str, Path]) -> None:
    engine = make_engine(model_dirs["llama"], block_size=BLOCK)
    prompt = list(range(40, 73))  # 33 tokens: 8 whole blocks may be reused
    assert one(engine, "a", prompt, greedy(2), cache_salt="tenant-a")[0].num_cached_tokens == 0
    same = one(engine, "b", prompt, greedy(2), cache_salt="tenant-a")
    assert same[0].num_cached_tokens == 32, "the same salt shares the cached blocks"
    assert one(engine, "c", prompt, greedy(2), cache_salt="tenant-b")[0].num_cached_tokens == 0
    assert one(engine, "d", prompt, greedy(2))[0].num_cached_tokens == 0, "unsalted: no share"
    assert one(engine, "e", prompt, greedy(2))[0].num_cached_tokens == 32
    # A salted hit computes the same tokens as the first run did.
    assert tokens_of(same) == tokens_of(one(engine, "f", prompt, greedy(2)))


START, END = [300], [301, 302]  # the markers: ids of the 512-token vocabulary


def budget(n: int, start: list[int] | None = None) -> p.ThinkingBudget:
    return p.ThinkingBudget(budget=n, start_token_ids=[start or START], end_token_ids=[END])


@pytest.fixture(scope="module")
def qwen3(model_dirs: dict[str, Path]) -> ModelEngine:
    return make_engine(model_dirs["qwen3"], block_size=BLOCK)


def test_the_end_marker_is_forced_exactly_at_the_budget(qwen3: ModelEngine) -> None:
    prompt = [5, 6, *START, 7]  # the prompt leaves thinking open, one token in it
    free = tokens_of(one(qwen3, "free", prompt, greedy(12)))
    assert not set(free[:3]) & {*START, *END}, "markers the model would pick: pick others"
    out = tokens_of(one(qwen3, "b4", prompt, greedy(12, thinking_budget=budget(4))))
    # 4 = the prompt's 1 thinking token + 3 generated; then the whole end marker.
    assert out[:3] == free[:3]
    assert out[3:5] == END
    spent = tokens_of(one(qwen3, "b1", prompt, greedy(4, thinking_budget=budget(1))))
    assert spent[:2] == END, "the prompt's own token spent a budget of 1"


def test_a_section_opened_by_the_output(qwen3: ModelEngine) -> None:
    prompt = [11, 12, 13]
    free = tokens_of(one(qwen3, "free", prompt, greedy(10)))
    opener = [free[1]]  # the model's own second token opens the thinking
    assert free[0] != opener[0] and not set(free[:4]) & set(END)
    out = tokens_of(one(qwen3, "o", prompt, greedy(10, thinking_budget=budget(2, opener))))
    assert out[:4] == free[:4] and out[4:6] == END


def test_forcing_overrides_the_other_rules_and_keeps_raw_logprobs(qwen3: ModelEngine) -> None:
    prompt = [5, 6, *START]
    rules = greedy(6, thinking_budget=budget(2), allowed_token_ids=[20, 21, 22],
                   logit_bias=[(301, -100.0)], bad_words_token_ids=[[302]], logprobs=1,
                   min_tokens=6, stop_token_ids=[2])
    outputs = one(qwen3, "rules", prompt, rules)
    out = tokens_of(outputs)
    assert set(out[:2]) <= {20, 21, 22} and out[2:4] == END and set(out[4:]) <= {20, 21, 22}
    entries = [lp for o in outputs for lp in (o.new_logprobs or [])]
    assert [e.token_id for e in entries] == out
    assert all(e.logprob < 0 for e in entries[2:4]), "the raw logits' logprob, not 1e9's"
    # Seeded sampling still advances per token: the same seed gives the same tokens.
    seeded = greedy(8, thinking_budget=budget(3), seed=7, temperature=1.0)
    first = tokens_of(one(qwen3, "s1", prompt, seeded))
    assert first[3:5] == END and first == tokens_of(one(qwen3, "s2", prompt, seeded))


def test_a_budget_the_engine_cannot_honour_is_refused(qwen3: ModelEngine) -> None:
    bad = greedy(4, thinking_budget=budget(2, [600]))
    (error,) = qwen3.add_request(p.EngineCoreRequest("bad", [5, 6], bad, 0.0))
    assert error.finish_reason == "error" and "token id 600" in (error.error_message or "")


def test_priority_under_preemption(model_dirs: dict[str, Path]) -> None:
    """A cache too small for all: the priority policy preempts the lowest; every request
    still finishes with the tokens it gets alone, the high-priority ones first."""
    model = model_dirs["llama"]
    engine = make_engine(model, block_size=BLOCK, scheduling_policy="priority",
                         enable_prefix_caching=False,
                         kv_cache_memory_bytes=10 * kv_bytes_per_block(model, BLOCK))
    prompts = {f"r{i}": list(range(50 + 9 * i, 58 + 9 * i)) for i in range(4)}
    alone = {rid: tokens_of(one(engine, rid, prompt, greedy(24)))
             for rid, prompt in prompts.items()}
    levels = {"r0": 5, "r1": -2, "r2": 0, "r3": -2}
    requests = [p.EngineCoreRequest(rid, prompts[rid], greedy(24), float(i), priority=levels[rid])
                for i, rid in enumerate(prompts)]
    finished: list[str] = []
    outputs: dict[str, list[Any]] = {rid: [] for rid in prompts}
    for request in requests:
        engine.add_request(request)
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs[out.request_id].append(out)
            if out.finish_reason is not None:
                finished.append(out.request_id)
    assert engine.stats().num_preemptions > 0, "the cache was meant to be short"
    assert {rid: tokens_of(outs) for rid, outs in outputs.items()} == alone
    assert finished.index("r1") < finished.index("r0")
    assert finished.index("r3") < finished.index("r0")
