"""logit_bias, allowed_token_ids and bad_words_token_ids through the engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import protocol as p
from tests.engine.engine_kit import hf_greedy, make_engine, run_to_completion, tokens_of

pytestmark = pytest.mark.engine


def greedy(max_tokens: int, **extra: Any) -> p.SamplingParams:
    return p.SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True, **extra)


def sampled(seed: int, max_tokens: int, **extra: Any) -> p.SamplingParams:
    return p.SamplingParams(
        max_tokens=max_tokens, temperature=1.0, seed=seed, ignore_eos=True, **extra
    )


PROMPT = [5, 90, 180, 270, 360, 450, 40]


@pytest.fixture(scope="module")
def engine(model_dirs: dict[str, Path]) -> Any:
    return make_engine(model_dirs["qwen2"], block_size=4, max_num_seqs=256)


def test_logit_bias_steers_greedy(engine: Any, hf_models: dict[str, Any]) -> None:
    reference = hf_greedy(hf_models["qwen2"], PROMPT, 6)
    target = 123 if reference[0] != 123 else 124
    outputs = run_to_completion(
        engine,
        [
            ("up", PROMPT, greedy(6, logit_bias=[(target, 100.0)])),
            ("down", PROMPT, greedy(6, logit_bias=[(reference[0], -100.0)])),
            ("plain", PROMPT, greedy(6)),  # same batch, untouched
        ],
    )
    assert tokens_of(outputs["up"]) == [target] * 6
    assert tokens_of(outputs["down"])[0] != reference[0]
    assert tokens_of(outputs["plain"]) == reference


def test_bad_words_match_the_output_only(engine: Any, hf_models: dict[str, Any]) -> None:
    reference = hf_greedy(hf_models["qwen2"], PROMPT, 4)
    outputs = run_to_completion(
        engine,
        [
            # The prompt ends with PROMPT[-1]: that must not ban the first greedy token.
            ("prompt-only", PROMPT, greedy(4, bad_words_token_ids=[[PROMPT[-1], reference[0]]])),
            ("one-token", PROMPT, greedy(4, bad_words_token_ids=[[reference[0]]])),
            # (r0, r1) banned: after r0 the greedy r1 must give way.
            ("two-tokens", PROMPT, greedy(4, bad_words_token_ids=[reference[:2]])),
        ],
    )
    assert tokens_of(outputs["prompt-only"]) == reference
    assert reference[0] not in tokens_of(outputs["one-token"])
    two = tokens_of(outputs["two-tokens"])
    assert two[0] == reference[0] and two[1] != reference[1]


def test_bad_words_and_allowed_ids_hold_on_sampled_batches(engine: Any) -> None:
    """100 seeded requests at temperature 1.0 in one batch each. A bias makes the banned
    tokens likely, and a run without the bans shows they would appear."""
    one, first, second = 77, 150, 151
    bias = [(one, 4.0), (first, 4.0), (second, 4.0)]
    words = [[one], [first, second]]

    def run(tag: str, **extra: Any) -> list[list[int]]:
        requests = [(f"{tag}{s}", PROMPT, sampled(s, 10, **extra)) for s in range(100)]
        outputs = run_to_completion(engine, requests)
        return [tokens_of(outputs[rid]) for rid, _, _ in requests]

    def pairs(seqs: list[list[int]]) -> set[tuple[int, int]]:
        return {(a, b) for s in seqs for a, b in zip(s, s[1:], strict=False)}

    free = run("free", logit_bias=bias)
    assert any(one in s for s in free) and (first, second) in pairs(free)
    banned = run("ban", logit_bias=bias, bad_words_token_ids=words)
    assert all(len(s) == 10 for s in banned)
    assert not any(one in s for s in banned)
    assert (first, second) not in pairs(banned)
    assert any(first in s for s in banned) and any(second in s for s in banned)

    allowed = [3, 60, 200, 333, 500]
    restricted = run("allow", allowed_token_ids=allowed)
    assert all(set(s) <= set(allowed) and len(s) == 10 for s in restricted)
    assert len({t for s in restricted for t in s}) >= 4  # still sampled, not collapsed
    # Seeds still decide: the same seed gives the same tokens.
    assert run("allow-again", allowed_token_ids=allowed) == restricted


def test_bad_token_lists_are_refused(engine: Any) -> None:
    cases = {
        "bias-id": (greedy(2, logit_bias=[(512, 1.0)]), "logit_bias token id 512"),
        "bias-nan": (greedy(2, logit_bias=[(5, float("nan"))]), "not a finite number"),
        "allowed-empty": (greedy(2, allowed_token_ids=[]), "allowed_token_ids is empty"),
        "allowed-id": (greedy(2, allowed_token_ids=[3, -1]), "allowed_token_ids token id -1"),
        "bad-empty": (greedy(2, bad_words_token_ids=[[]]), "empty sequence"),
        "bad-id": (greedy(2, bad_words_token_ids=[[4, 600]]), "bad_words_token_ids token id 600"),
    }
    for rid, (params, message) in cases.items():
        outs = engine.add_request(p.EngineCoreRequest(rid, PROMPT, params, 0.0))
        assert len(outs) == 1 and outs[0].finish_reason == "error", rid
        assert message in outs[0].error_message, (rid, outs[0].error_message)
    assert not engine.has_unfinished_requests()
