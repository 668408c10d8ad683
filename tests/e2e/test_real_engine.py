"""The real engine behind every frontend: greedy output equals transformers' generate().

`vrs serve <demo model dir>` (no --mock) runs the tiny random-weight Qwen3 through the
paged-KV engine; the same prompts through transformers must give the same tokens. The
shared real servers run the request modes (rust-serve, python); `vrs frontend` (Python
starts the real engine, vrs-rs serves on the inherited sockets) is checked here once, with
the same two requests.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anthropic
import pytest
import torch

from tests.e2e.servers import MODEL, REAL_ENGINE_ARGS, Server

pytestmark = pytest.mark.e2e

MAX_TOKENS = 12
PROMPTS = ["The weather in 北京 today", "def fibonacci(n):", "🌍 hello", "a " * 40]


def greedy(reference: Any, ids: list[int]) -> list[int]:
    with torch.inference_mode():
        out = reference.generate(torch.tensor([ids]), max_new_tokens=MAX_TOKENS,
                                 min_new_tokens=MAX_TOKENS, do_sample=False)
    return out[0, len(ids):].tolist()


def check_completions(server: Server, tokenizer: Any, reference: Any) -> None:
    client = server.client()
    prompts = [tokenizer(p, add_special_tokens=False).input_ids for p in PROMPTS]

    def complete(ids: list[int]) -> Any:
        return client.completions.create(model=MODEL, prompt=ids, max_tokens=MAX_TOKENS,
                                         temperature=0, extra_body={"ignore_eos": True})

    with ThreadPoolExecutor(len(prompts)) as pool:  # concurrent: batched in the engine
        responses = list(pool.map(complete, prompts))
    for ids, response in zip(prompts, responses, strict=True):
        expected = greedy(reference, ids)
        assert response.usage.prompt_tokens == len(ids)
        assert response.usage.completion_tokens == MAX_TOKENS
        assert response.choices[0].finish_reason == "length"
        assert response.choices[0].text == tokenizer.decode(expected, skip_special_tokens=True)


def check_chat(server: Server, tokenizer: Any, reference: Any) -> None:
    messages = [{"role": "system", "content": "Answer briefly."},
                {"role": "user", "content": "What is 2 + 2? 用中文回答"}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True,
                                        return_dict=False)
    expected = greedy(reference, list(ids))
    stream = server.client().chat.completions.create(
        model=MODEL, messages=messages, max_tokens=MAX_TOKENS, temperature=0, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        usage = chunk.usage or usage
    assert usage is not None and usage.prompt_tokens == len(ids)
    assert usage.completion_tokens == MAX_TOKENS
    assert text == tokenizer.decode(expected, skip_special_tokens=True)


def test_completions_greedy_equal_transformers(real_server: Server, tokenizer: Any,
                                               reference: Any) -> None:
    check_completions(real_server, tokenizer, reference)


def test_chat_greedy_equals_transformers(real_server: Server, tokenizer: Any,
                                         reference: Any) -> None:
    check_chat(real_server, tokenizer, reference)


def test_rust_frontend_serves_the_real_engine(demo_model: Path, tmp_path: Path,
                                              tokenizer: Any, reference: Any) -> None:
    server = Server("rust-frontend", demo_model, tmp_path / "server.log", mock=False,
                    cli_args=REAL_ENGINE_ARGS)
    try:
        check_completions(server, tokenizer, reference)
        check_chat(server, tokenizer, reference)
    finally:
        assert server.stop() == 0, server.log()
        server.assert_all_gone()


def test_responses_and_messages_generate_what_chat_generates(real_server: Server) -> None:
    """The Responses and Messages APIs on the demo model, through the official SDKs:
    greedy, the same reasoning and text as the equivalent chat request (itself equal to
    transformers above), whole and streamed."""
    system, question = "Answer briefly.", "Name a colour. 用中文回答"
    chat = real_server.client().chat.completions.create(
        model=MODEL, max_tokens=MAX_TOKENS, temperature=0,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": question}])
    message = chat.choices[0].message
    expected = (getattr(message, "reasoning_content", None) or "", message.content or "")
    assert "".join(expected), "the chat request generated nothing to compare"

    openai_args = {"model": MODEL, "instructions": system, "input": question,
                   "max_output_tokens": MAX_TOKENS, "temperature": 0}
    whole = real_server.client().responses.create(**openai_args)
    # Streamed: the terminal event carries the response (`response.incomplete` at the
    # token limit, which the SDK's `responses.stream` helper does not finish on).
    events = list(real_server.client().responses.create(**openai_args, stream=True))
    assert events[-1].type in ("response.completed", "response.incomplete")
    streamed = events[-1].response
    assert streamed.status == whole.status
    for response in (whole, streamed):
        reasoning = "".join(part.text for item in response.output if item.type == "reasoning"
                            for part in item.content or [])
        assert (reasoning, response.output_text) == expected
        assert response.usage.input_tokens == chat.usage.prompt_tokens
        # The chat request left the prompt in the prefix cache.
        assert 0 < response.usage.input_tokens_details.cached_tokens < chat.usage.prompt_tokens
        assert response.usage.output_tokens == chat.usage.completion_tokens

    messages = anthropic.Anthropic(base_url=real_server.url, api_key="unused", max_retries=0)
    # (the SDK no longer takes temperature as an argument; the API still does)
    anthropic_args: dict[str, Any] = {
        "model": MODEL, "system": system, "max_tokens": MAX_TOKENS,
        "extra_body": {"temperature": 0}, "messages": [{"role": "user", "content": question}]}
    whole_message = messages.messages.create(**anthropic_args)
    with messages.messages.stream(**anthropic_args) as stream:
        final = stream.get_final_message()
    stop = {"length": "max_tokens", "stop": "end_turn"}[chat.choices[0].finish_reason]
    for message in (whole_message, final):
        thinking = "".join(b.thinking for b in message.content if b.type == "thinking")
        text = "".join(b.text for b in message.content if b.type == "text")
        assert (thinking, text) == expected
        # Anthropic's split (the chat request left the prompt in the prefix cache):
        # input + cache read = the prompt.
        usage = message.usage
        assert usage.cache_read_input_tokens and usage.cache_creation_input_tokens == 0
        assert usage.input_tokens + usage.cache_read_input_tokens == chat.usage.prompt_tokens
        assert usage.output_tokens == chat.usage.completion_tokens
        assert message.stop_reason == stop


@pytest.mark.parametrize("mode", ["rust-serve", "python"])
def test_two_real_engines_give_the_single_engine_tokens(
        mode: str, demo_model: Path, tmp_path: Path, tokenizer: Any, reference: Any) -> None:
    server = Server(mode, demo_model, tmp_path / "dp.log", mock=False, engine_count=2,
                    cli_args=("--data-parallel-size", "2", "--device", "cpu",
                              "--dtype", "float32", "--kv-cache-memory", "64MiB"))
    try:
        client = server.client()
        prompts = [tokenizer(p, add_special_tokens=False).input_ids for p in PROMPTS]

        def complete(ids: list[int]) -> Any:
            return client.completions.create(model=MODEL, prompt=ids, max_tokens=MAX_TOKENS,
                                             temperature=0, extra_body={"ignore_eos": True})

        with ThreadPoolExecutor(len(prompts)) as pool:
            responses = list(pool.map(complete, prompts))
        for ids, response in zip(prompts, responses, strict=True):
            expected = tokenizer.decode(greedy(reference, ids), skip_special_tokens=True)
            assert response.choices[0].text == expected
        assert len(server.engines()) == 2
    finally:
        assert server.stop() == 0, server.log()
        server.assert_all_gone()
