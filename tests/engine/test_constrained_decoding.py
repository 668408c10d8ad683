"""Structured outputs in the real engine: the demo model (random weights, real tokenizer),
constrained and unconstrained requests in one batch, seeds, preemption, a slow grammar
that must not stall the others, and specs that do not compile."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from engine import protocol as p
from engine.config import EngineConfig
from engine.runtime.engine import ModelEngine
from tests.structured_cases import SCHEMAS, cases, check, closing_bias, schema_text

pytestmark = pytest.mark.engine

PROMPT = [5, 6, 7, 8, 9, 10, 11, 12]


@pytest.fixture(scope="module")
def demo() -> Path:
    from engine.mock.demo_model import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture(scope="module")
def tokenizer(demo: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(demo))


def make_engine(demo: Path, **overrides: Any) -> ModelEngine:
    return ModelEngine.from_config(EngineConfig(model=str(demo), dtype="float32", **overrides))


def request(
    rid: str,
    spec: p.StructuredOutputs | None,
    seed: int | None = None,
    prompt: list[int] | None = None,
    **params: Any,
) -> p.EngineCoreRequest:
    sampling = p.SamplingParams(
        max_tokens=params.pop("max_tokens", 100),
        temperature=0.0 if seed is None else 1.0,
        seed=seed,
        structured_outputs=spec,
        **params,
    )
    return p.EngineCoreRequest(rid, prompt or PROMPT, sampling, time.time())


def run(
    engine: ModelEngine, requests: list[p.EngineCoreRequest], limit_s: float = 120.0
) -> dict[str, p.EngineCoreOutput]:
    """Add ``requests``, step to the end; the finishing output of each, with every token."""
    tokens: dict[str, list[int]] = {}
    last: dict[str, p.EngineCoreOutput] = {}
    for req in requests:
        for out in engine.add_request(req):
            last[out.request_id] = out
    deadline = time.monotonic() + limit_s
    while engine.has_unfinished_requests():
        assert time.monotonic() < deadline, "the engine did not finish"
        for out in engine.step():
            tokens.setdefault(out.request_id, []).extend(out.new_token_ids)
            if out.finish_reason is not None:
                last[out.request_id] = out
    for rid, out in last.items():
        out.new_token_ids = tokens.get(rid, [])
    return last


def text_of(tokenizer: Any, out: p.EngineCoreOutput) -> str:
    return tokenizer.decode(out.new_token_ids, skip_special_tokens=True)


def test_a_mixed_batch_follows_every_constraint(demo: Path, tokenizer: Any) -> None:
    """Every spec kind, greedy and seeded, in one batch with unconstrained requests whose
    tokens must equal their solo run (a row's mask never leaks into another)."""
    engine = make_engine(demo)
    free = [request("free-greedy", None), request("free-seeded", None, seed=7)]
    solo = run(engine, free)
    constrained = [
        request(f"{name}-{seed}", spec, seed=seed)
        for name, spec, _, _ in cases()
        for seed in (None, 3)
    ]
    # JSON mode on random weights never closes its strings by chance: a bias toward `{}`
    # keeps it short, and a stronger one toward arrays must lose to the grammar.
    mode = p.StructuredOutputs(json_object=True)
    bias = closing_bias(lambda text: tokenizer.encode(text, add_special_tokens=False))
    constrained.append(request("mode", mode, logit_bias=sorted(bias.items())))
    both = run(
        engine,
        [request(f"{r.request_id}-again", None, seed=r.sampling_params.seed) for r in free]
        + constrained,
    )
    rules = {
        f"{name}-{seed}": (kind, rule) for name, _, kind, rule in cases() for seed in (None, 3)
    }
    rules["mode"] = ("object", None)
    for rid, (kind, rule) in rules.items():
        out = both[rid]
        assert out.finish_reason == "stop", (rid, out)
        check(kind, rule, text_of(tokenizer, out))
    for r in free:
        assert both[f"{r.request_id}-again"].new_token_ids == solo[r.request_id].new_token_ids


def test_seeds_give_different_valid_outputs_and_repeat(demo: Path, tokenizer: Any) -> None:
    engine = make_engine(demo)
    schema = SCHEMAS["flat"]
    spec = p.StructuredOutputs(json=schema_text(schema))
    outs = run(
        engine,
        [request(f"n{i}", spec, seed=100 + i) for i in range(4)]
        + [request("repeat", spec, seed=100)],
    )
    texts = [text_of(tokenizer, outs[f"n{i}"]) for i in range(4)]
    for text in texts:
        jsonschema.validate(json.loads(text), schema)
    assert len(set(texts)) > 1
    assert text_of(tokenizer, outs["repeat"]) == texts[0]


def test_preempted_requests_keep_their_grammar_state(demo: Path, tokenizer: Any) -> None:
    # 24 blocks of 16 tokens for 12 requests that each grow past 2 blocks: preemption.
    engine = make_engine(demo, kv_cache_memory_bytes=25 * 16 * 2 * 2 * 2 * 32 * 4, max_num_seqs=12)
    schema = SCHEMAS["array_of_objects"]
    spec = p.StructuredOutputs(json=schema_text(schema))
    prompt = list(range(20, 40))
    outs = run(
        engine, [request(f"p{i}", spec, seed=i, prompt=prompt, max_tokens=60) for i in range(12)]
    )
    assert engine.scheduler.num_preemptions > 0
    assert engine.kv_cache.prefix_cache_hits > 0
    for i in range(12):
        out = outs[f"p{i}"]
        jsonschema.validate(json.loads(text_of(tokenizer, out)), schema)


# xgrammar takes about a second over this regex (with the GIL released, on threads of
# the lowest priority).
SLOW = p.StructuredOutputs(regex="[a-z]{1,3000}[0-9]{1,3000}")


def test_a_slow_grammar_waits_without_stalling_others(demo: Path, tokenizer: Any) -> None:
    engine = make_engine(demo)
    run(engine, [request("warm", p.StructuredOutputs(regex="x"))])  # tokenizer info built
    engine.add_request(request("slow", SLOW, max_tokens=4))
    engine.add_request(request("free", None, max_tokens=3))
    assert "slow" in engine.pending and engine.stats().num_waiting == 2  # both wait
    finished: dict[str, p.EngineCoreOutput] = {}
    tokens: list[int] = []
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.request_id == "slow":
                tokens.extend(out.new_token_ids)
            if out.finish_reason is not None:
                finished[out.request_id] = out
                if out.request_id == "free":  # it never waited for the grammar
                    assert "slow" in engine.pending
                    assert engine.stats().num_waiting == 1
    assert list(finished) == ["free", "slow"]
    assert finished["slow"].finish_reason == "length"
    assert re.fullmatch("[a-z]+", tokenizer.decode(tokens))


def test_a_grammar_past_the_compile_timeout_is_an_invalid_request(demo: Path) -> None:
    engine = make_engine(demo, structured_outputs_compile_timeout=0.2)
    run(engine, [request("warm", p.StructuredOutputs(regex="x"))])  # tokenizer info built
    outs = run(engine, [request("slow", SLOW), request("free", None, max_tokens=3)])
    slow = outs["slow"]
    assert (slow.finish_reason, slow.error_kind) == ("error", "invalid_request")
    assert "did not compile within 0.2 s" in (slow.error_message or "")
    assert outs["free"].finish_reason == "length"


def test_a_bad_spec_is_an_invalid_request_and_the_engine_goes_on(
    demo: Path, tokenizer: Any
) -> None:
    engine = make_engine(demo)
    outs = run(
        engine,
        [
            request("bad", p.StructuredOutputs(regex="(x")),
            request("worse", p.StructuredOutputs(json='{"type": "objectx"}')),
            request("good", p.StructuredOutputs(choice=["ok"])),
        ],
    )
    for rid in ("bad", "worse"):
        assert (outs[rid].finish_reason, outs[rid].error_kind) == ("error", "invalid_request")
    assert "the regex does not compile" in (outs["bad"].error_message or "")
    assert "not valid JSON Schema" in (outs["worse"].error_message or "")
    assert text_of(tokenizer, outs["good"]) == "ok"
    assert outs["good"].finish_reason == "stop"


def test_the_grammar_ends_the_request_even_against_ignore_eos_and_min_tokens(
    demo: Path, tokenizer: Any
) -> None:
    engine = make_engine(demo)
    spec = p.StructuredOutputs(choice=["yes", "no"])
    outs = run(
        engine,
        [request("ignore", spec, ignore_eos=True), request("min", spec, seed=1, min_tokens=10)],
    )
    for out in outs.values():
        assert out.finish_reason == "stop"
        assert out.stop_token_id in engine.eos_token_ids
        assert text_of(tokenizer, out) in ("yes", "no")


def test_max_tokens_cuts_a_constrained_output_short(demo: Path, tokenizer: Any) -> None:
    engine = make_engine(demo)
    schema = SCHEMAS["nested"]
    out = run(
        engine, [request("cut", p.StructuredOutputs(json=schema_text(schema)), max_tokens=3)]
    )["cut"]
    assert out.finish_reason == "length" and len(out.new_token_ids) == 3
    with pytest.raises(json.JSONDecodeError):
        json.loads(text_of(tokenizer, out))


def test_a_waiting_request_can_be_aborted(demo: Path) -> None:
    engine = make_engine(demo)
    engine.add_request(request("slow", SLOW))
    assert engine.has_unfinished_requests()
    (out,) = engine.abort_requests(["slow"])
    assert out.finish_reason == "abort"
    assert not engine.has_unfinished_requests()


def test_the_spec_travels_on_the_wire(demo: Path) -> None:
    spec = p.StructuredOutputs(json=schema_text(SCHEMAS["enum"]))
    wire = p.encode(request("w", spec))
    decoded = msgspec.msgpack.decode(wire, type=p.EngineCoreRequest)
    assert decoded.sampling_params.structured_outputs == spec
