"""Evaluation features through every frontend on the real engine (the demo model, fp32).

Prompt logprobs (vLLM's ``prompt_logprobs`` and completions' ``echo`` + ``logprobs``) must
equal transformers' ``log_softmax`` of the prompt's logits token by token, within 1e-4,
for a prompt longer than the chunked-prefill budget and for a request whose prefix is
already cached. ``logit_bias``, ``bad_words`` and ``allowed_token_ids`` steer sampling;
batched prompts come back at index ``i * n + j``.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import torch

from tests.e2e.servers import MODEL, PREFILL_BUDGET, Server

pytestmark = pytest.mark.e2e

LONG = "The quick brown fox jumps over the lazy dog. 数据 " * 12
TOL = 1e-4


def prompt_logprobs(reference: Any, ids: list[int]) -> torch.Tensor:
    """log_softmax of the logits at every prompt position (row i predicts token i + 1)."""
    with torch.inference_mode():
        logits = reference(torch.tensor([ids])).logits[0].float()
    return torch.log_softmax(logits, dim=-1)


def post(server: Server, path: str, body: dict[str, Any]) -> dict[str, Any]:
    response = httpx.post(f"{server.url}/v1/{path}", json={"model": MODEL, **body}, timeout=120)
    assert response.status_code == 200, response.text
    return response.json()


def check_vllm_prompt_logprobs(entries: list[Any], ids: list[int], expected: torch.Tensor,
                               k: int) -> None:
    assert len(entries) == len(ids) and entries[0] is None
    for i in range(1, len(ids)):
        entry = entries[i]
        token = str(ids[i])
        assert next(iter(entry)) == token, "the prompt token comes first"
        row = expected[i - 1]
        assert abs(entry[token]["logprob"] - row[ids[i]].item()) < TOL, (i, entry[token])
        assert entry[token]["rank"] == int((row > row[ids[i]]).sum().item()) + 1
        top = torch.topk(row, k)
        for tid, value in zip(top.indices.tolist(), top.values.tolist(), strict=True):
            assert abs(entry[str(tid)]["logprob"] - value) < TOL
        assert len(entry) in (k, k + 1)


def test_prompt_logprobs_longer_than_the_prefill_budget(real_server: Server, tokenizer: Any,
                                                        reference: Any) -> None:
    ids = tokenizer(LONG, add_special_tokens=False).input_ids
    assert len(ids) > 3 * PREFILL_BUDGET
    body = post(real_server, "completions", {"prompt": ids, "max_tokens": 2,
                                             "prompt_logprobs": 3, "temperature": 0})
    check_vllm_prompt_logprobs(body["choices"][0]["prompt_logprobs"], ids,
                               prompt_logprobs(reference, ids), 3)


def test_prompt_logprobs_of_a_cached_prefix(real_server: Server, tokenizer: Any,
                                            reference: Any) -> None:
    first = tokenizer("Shared prefix: " + LONG[:200], add_special_tokens=False).input_ids
    post(real_server, "completions", {"prompt": first, "max_tokens": 1})  # warms the cache
    ids = first + tokenizer(" and then something else", add_special_tokens=False).input_ids
    body = post(real_server, "completions", {"prompt": ids, "max_tokens": 1,
                                             "prompt_logprobs": 2})
    check_vllm_prompt_logprobs(body["choices"][0]["prompt_logprobs"], ids,
                               prompt_logprobs(reference, ids), 2)


def test_chat_prompt_logprobs(real_server: Server, tokenizer: Any, reference: Any) -> None:
    messages = [{"role": "user", "content": "Name a colour."}]
    ids = list(tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                             tokenize=True, return_dict=False))
    body = post(real_server, "chat/completions", {"messages": messages, "max_tokens": 2,
                                                  "prompt_logprobs": 1})
    check_vllm_prompt_logprobs(body["prompt_logprobs"], ids, prompt_logprobs(reference, ids), 1)


def test_echo_logprobs_with_max_tokens_zero(real_server: Server, tokenizer: Any,
                                            reference: Any) -> None:
    text = "Question: what is frozen water? Answer: ice"
    ids = tokenizer(text, add_special_tokens=False).input_ids
    body = post(real_server, "completions", {"prompt": text, "max_tokens": 0, "echo": True,
                                             "logprobs": 1})
    choice = body["choices"][0]
    assert choice["text"] == text and choice["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 0
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(ids)
    assert "".join(logprobs["tokens"]) == text
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    expected = prompt_logprobs(reference, ids)
    for i in range(1, len(ids)):
        assert abs(logprobs["token_logprobs"][i] - expected[i - 1, ids[i]].item()) < TOL
        assert next(iter(logprobs["top_logprobs"][i])) == logprobs["tokens"][i], "token first"
        assert math.isclose(max(logprobs["top_logprobs"][i].values()),
                            expected[i - 1].max().item(), abs_tol=TOL)
    offsets = [0]
    for token in logprobs["tokens"][:-1]:
        offsets.append(offsets[-1] + len(token))
    assert logprobs["text_offset"] == offsets


def test_logit_bias_forces_the_greedy_token(real_server: Server, tokenizer: Any) -> None:
    forced = tokenizer("x", add_special_tokens=False).input_ids[0]
    body = post(real_server, "completions", {
        "prompt": "Say something:", "max_tokens": 6, "temperature": 0, "ignore_eos": True,
        "logit_bias": {str(forced): 100}})
    assert body["choices"][0]["text"] == "x" * 6


def test_allowed_token_ids_and_bad_words_hold_when_sampling(real_server: Server,
                                                            tokenizer: Any) -> None:
    allowed = [tokenizer(c, add_special_tokens=False).input_ids[0] for c in "xyz!"]
    banned = tokenizer("!", add_special_tokens=False).input_ids[0]

    def sample(seed: int) -> list[str]:
        body = post(real_server, "completions", {
            "prompt": "Letters:", "max_tokens": 5, "temperature": 1.0, "seed": seed, "n": 4,
            "ignore_eos": True, "allowed_token_ids": allowed, "bad_words": ["!"],
            "logit_bias": {str(banned): 50}})
        return [choice["text"] for choice in body["choices"]]

    with ThreadPoolExecutor(5) as pool:
        texts = [text for batch in pool.map(sample, range(25)) for text in batch]
    assert len(texts) == 100
    assert all(len(text) == 5 and set(text) <= set("xyz") for text in texts), texts
    assert len(set(texts)) > 1, "sampling at temperature 1 gives different outputs"


def test_batched_prompts_with_n_return_every_choice_at_its_index(real_server: Server,
                                                                 tokenizer: Any,
                                                                 reference: Any) -> None:
    prompts = ["The weather today", "def main():", "数据科学"]
    body = post(real_server, "completions", {"prompt": prompts, "n": 2, "max_tokens": 4,
                                             "temperature": 0, "ignore_eos": True})
    choices = body["choices"]
    assert [c["index"] for c in choices] == list(range(6))
    lengths = [len(tokenizer(p, add_special_tokens=False).input_ids) for p in prompts]
    assert body["usage"]["prompt_tokens"] == sum(lengths)
    assert body["usage"]["completion_tokens"] == 6 * 4
    for i, prompt in enumerate(prompts):
        ids = tokenizer(prompt, add_special_tokens=False).input_ids
        with torch.inference_mode():
            out = reference.generate(torch.tensor([ids]), max_new_tokens=4, min_new_tokens=4,
                                     do_sample=False)
        expected = tokenizer.decode(out[0, len(ids):], skip_special_tokens=True)
        assert choices[2 * i]["text"] == choices[2 * i + 1]["text"] == expected
