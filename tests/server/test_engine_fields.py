"""server/validate/engine_fields.py called directly (as rust/server/src/validate/
engine_fields/tests.rs calls its twin): each rule's 400 and what goes to the engine."""

from __future__ import annotations

from typing import Any

import pytest

from engine import protocol as p
from server import openai as s
from server.edge.error import APIError
from server.parsers.reasoning import markers_of
from server.validate import engine_fields

pytestmark = pytest.mark.unit


def encode(text: str) -> list[int]:
    return [ord(c) for c in text]  # a stand-in tokenizer: one id per character


def apply(policy: str | None = "fcfs", parser: str | None = "qwen3",
          constraint: str | None = None, **fields: Any) -> tuple[p.SamplingParams, int,
                                                                   str | None]:
    request = s.CompletionRequest(prompt="x", **fields)
    sampling = p.SamplingParams(max_tokens=1)
    level, salt = engine_fields.apply(request, sampling, policy, markers_of(parser),
                                      constraint, encode)
    return sampling, level, salt


def refusal(**kwargs: Any) -> tuple[str | None, str]:
    with pytest.raises(APIError) as caught:
        apply(**kwargs)
    return caught.value.param, caught.value.message


@pytest.mark.parametrize("kwargs, param, words", [
    ({"priority": 1}, "priority", "Got priority 1 but Priority scheduling is not enabled"),
    ({"priority": True, "policy": "priority"}, "priority", "must be an integer"),
    ({"priority": 2**63, "policy": "priority"}, "priority", "must be an integer"),
    ({"cache_salt": ""}, "cache_salt", "non-empty string"),
    ({"cache_salt": "x" * 129}, "cache_salt", "at most 128 characters"),
    ({"cache_salt": "a\x00b"}, "cache_salt", "or NUL"),
    ({"kv_transfer_params": [1]}, "kv_transfer_params", "must be an object"),
    ({"vllm_xargs": {"a": None}}, "vllm_xargs", "`a` is another value"),
    ({"vllm_xargs": {"a": [1, [2]]}}, "vllm_xargs", "`a` holds another value"),
    ({"thinking_token_budget": -2}, "thinking_token_budget", "-1 for unlimited"),
    ({"thinking_token_budget": 1.0}, "thinking_token_budget", "non-negative integer"),
    ({"thinking_token_budget": 3, "parser": None}, "thinking_token_budget",
     "needs a reasoning parser"),
    ({"thinking_token_budget": 3, "constraint": "structured_outputs.regex"},
     "thinking_token_budget", "cannot be combined with `structured_outputs.regex`"),
])
def test_each_rule_names_its_field(kwargs: dict[str, Any], param: str, words: str) -> None:
    got, message = refusal(**kwargs)
    assert got == param and words in message, message


def test_what_goes_to_the_engine() -> None:
    sampling, level, salt = apply(
        policy="priority", parser="granite", priority=-9, cache_salt="ß" * 128,
        thinking_token_budget=2**40,
        vllm_xargs={"b": "s", "kv_transfer_params": 1, "a": [1, "x", 2.5, True], "t": True,
                    "big": 2**64},
        kv_transfer_params={"do_remote_prefill": False, "ids": [1, 2**70]})
    assert (level, salt) == (-9, "ß" * 128)
    assert sampling.extra_args == {
        "b": "s", "kv_transfer_params": {"do_remote_prefill": False, "ids": [1, float(2**70)]},
        "a": [1, "x", 2.5, 1], "t": 1, "big": float(2**64)}
    markers = markers_of("granite")
    assert markers is not None
    assert sampling.thinking_budget == p.ThinkingBudget(
        budget=2**32 - 1, start_token_ids=[encode(m) for m in markers.start],
        end_token_ids=[encode(m) for m in markers.end])
    # Nothing set, -1, or empty objects: the wire's defaults; the render service (no
    # policy) takes any priority.
    sampling, level, salt = apply(policy=None, priority=4, thinking_token_budget=-1,
                                  vllm_xargs={}, kv_transfer_params={})
    assert (level, salt, sampling.extra_args, sampling.thinking_budget) == (4, None, None, None)
