"""The request fields the engine acts on, on the real engine behind both request modes:
``cache_salt`` (same salt: cached tokens; another salt: none), ``thinking_token_budget``
(the demo template leaves ``<think>`` open: the end marker is the generated token right
after the budget, and the reasoning stops there) and ``vllm_xargs`` /
``kv_transfer_params`` (served; the latter with vLLM's no-connector warning). The 400s
(``priority`` without ``--scheduling-policy priority``, bad values) are in
tests/request_cases/bad_requests.json."""

from __future__ import annotations

import random
import time
import uuid
from typing import Any

import pytest

from tests.e2e.servers import MODEL, REAL_ENGINE_ARGS, Server

pytestmark = pytest.mark.e2e

BLOCK = int(REAL_ENGINE_ARGS[REAL_ENGINE_ARGS.index("--block-size") + 1])
THINKING = {"chat_template_kwargs": {"enable_thinking": True}, "ignore_eos": True}


def cached(usage: Any) -> int:
    return usage.prompt_tokens_details.cached_tokens


def test_the_cache_salt_separates_cached_prompts(real_server: Server) -> None:
    client = real_server.client()
    rng = random.Random(uuid.uuid4().int)
    prompt = [rng.randrange(1000, 100_000) for _ in range(41)]  # 10 whole blocks of 4

    def complete(**extra: Any) -> Any:
        return client.completions.create(model=MODEL, prompt=prompt, max_tokens=1,
                                         temperature=0, extra_body=extra)

    assert cached(complete(cache_salt="tenant-a").usage) == 0
    assert cached(complete(cache_salt="tenant-a").usage) == 40
    assert cached(complete(cache_salt="tenant-b").usage) == 0
    assert cached(complete().usage) == 0, "an unsalted prompt shares no salted block"
    assert cached(complete().usage) == 40


@pytest.mark.parametrize("budget", [0, 5])
def test_the_thinking_budget_forces_the_end_marker(real_server: Server, budget: int) -> None:
    client = real_server.client()

    def chat(**extra: Any) -> Any:
        return client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "think about it"}],
            max_tokens=budget + 4, temperature=0, logprobs=True,
            extra_body={**THINKING, **extra})

    free = chat().choices[0]
    free_tokens = [entry.token for entry in free.logprobs.content]
    assert "</think>" not in free_tokens, "the model closes on its own: no budget to see"
    cut = chat(thinking_token_budget=budget)
    choice = cut.choices[0]
    tokens = [entry.token for entry in choice.logprobs.content]
    # The prompt ends in "<think>": the first `budget` tokens are the model's own, then
    # the forced "</think>", then the answer.
    assert tokens[:budget] == free_tokens[:budget]
    assert tokens[budget] == "</think>", tokens
    # The reasoning parser split there: the marker is in neither part.
    assert "</think>" not in (choice.message.reasoning_content or "") + choice.message.content
    assert cut.usage.completion_tokens_details.reasoning_tokens == budget + 1


def test_xargs_and_kv_transfer_params_are_served(real_server: Server) -> None:
    answer = real_server.client().completions.create(
        model=MODEL, prompt="hello", max_tokens=2, temperature=0,
        extra_body={"vllm_xargs": {"session_id": "s-1", "n": [1, 2.5]},
                    "kv_transfer_params": {"do_remote_prefill": False}})
    assert answer.usage.completion_tokens == 2
    deadline = time.monotonic() + 10
    while "Got kv_transfer_params, but no KVConnector found" not in real_server.log():
        assert time.monotonic() < deadline, real_server.log()[-4000:]
        time.sleep(0.1)
