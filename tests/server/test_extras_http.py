"""vLLM's request extensions over HTTP (spec: docs/api.md "vLLM's request extensions"): the
Python server in-process with the mock engine's scripted replies and the reasoning parser
the demo template gets (qwen3): token ids where vLLM puts them, whole and streamed, token
ids as logprobs' names, ``include_reasoning`` / ``separate_reasoning``, the
``reasoning_effort`` rule as the prompt shows it, truncation, messages sent back as the
openai SDK returns them, and the ``guided_*`` fields' constraint and deprecation log."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from server.validate import guided
from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

REASONED = "<think>Two plus two is 4.</think>The answer is 4."
REPLIES = [{"when": "[reason]", "reply": REASONED},
           {"when": "[script]", "reply": "alpha beta gamma"}]


@pytest.fixture(scope="module")
def server(demo_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonServer]:
    running = PythonServer(demo_model, tmp_path_factory.mktemp("extras") / "server.log",
                           engine={"mock_replies": REPLIES})
    yield running
    assert running.stop() == 0, running.log()


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def post(server: PythonServer, path: str, body: dict[str, Any]) -> Any:
    response = server.post(path, {"model": MODEL, **body})
    assert response.status_code == 200, response.text
    return response.json()


def events(server: PythonServer, path: str, body: dict[str, Any]) -> list[Any]:
    with httpx.stream("POST", f"{server.url}{path}",
                      json={"model": MODEL, "stream": True, **body}, timeout=60) as response:
        assert response.status_code == 200, response.read()
        return [json.loads(line[6:]) for line in response.iter_lines()
                if line.startswith("data: ") and line != "data: [DONE]"]


def detokenize(server: PythonServer, ids: list[int]) -> str:
    return str(post(server, "/detokenize", {"tokens": ids})["prompt"])


def chat_prompt_ids(server: PythonServer, messages: list[dict[str, Any]]) -> list[int]:
    body = {"messages": messages, "add_generation_prompt": True}
    return list(post(server, "/tokenize", body)["tokens"])


def test_chat_token_ids_whole_and_streamed(server: PythonServer) -> None:
    body = {"messages": user("[script] go"), "return_token_ids": True, "max_tokens": 20}
    whole = post(server, "/v1/chat/completions", body)
    choice = whole["choices"][0]
    assert whole["prompt_token_ids"] == chat_prompt_ids(server, user("[script] go"))
    assert list(whole)[-1] == "prompt_token_ids"
    ids = choice["token_ids"]
    assert len(ids) == whole["usage"]["completion_tokens"]  # the EOS included
    assert detokenize(server, ids).startswith("alpha beta gamma")
    assert list(choice) == ["index", "message", "logprobs", "finish_reason", "token_ids"]
    chunks = events(server, "/v1/chat/completions", body)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[0]["prompt_token_ids"] == whole["prompt_token_ids"]
    assert "token_ids" not in chunks[0]["choices"][0]
    assert all("prompt_token_ids" not in c for c in chunks[1:])
    streamed = [i for c in chunks[1:] for i in c["choices"][0]["token_ids"]]
    assert streamed == ids
    plain = post(server, "/v1/chat/completions", {**body, "return_token_ids": False})
    assert "prompt_token_ids" not in plain and "token_ids" not in plain["choices"][0]


def test_completion_token_ids_per_prompt(server: PythonServer) -> None:
    body = {"prompt": ["[script] a", "[script] bb"], "return_token_ids": True,
            "max_tokens": 20, "echo": True}
    whole = post(server, "/v1/completions", body)
    for index, prompt in enumerate(body["prompt"]):
        choice = whole["choices"][index]
        assert choice["prompt_token_ids"] == post(server, "/tokenize", {"prompt": prompt})[
            "tokens"]
        assert choice["text"].startswith(prompt)  # echo keeps the prompt's text
        assert detokenize(server, choice["token_ids"]).startswith("alpha beta gamma")
        assert list(choice) == ["index", "text", "logprobs", "finish_reason", "token_ids",
                                "prompt_token_ids"]
    chunks = events(server, "/v1/completions", {**body, "prompt": body["prompt"][0]})
    assert chunks[0]["choices"][0]["prompt_token_ids"] == whole["choices"][0]["prompt_token_ids"]
    assert all("prompt_token_ids" not in c["choices"][0] for c in chunks[1:])
    streamed = [i for c in chunks for i in c["choices"][0]["token_ids"]]
    assert streamed == whole["choices"][0]["token_ids"]
    only_echo = post(server, "/v1/completions", {**body, "prompt": "[script] a",
                                                 "max_tokens": 0})
    assert only_echo["choices"][0]["token_ids"] == []


def test_token_ids_as_logprobs_names(server: PythonServer) -> None:
    body = {"messages": user("[script] go"), "return_token_ids": True, "logprobs": True,
            "top_logprobs": 2, "return_tokens_as_token_ids": True, "max_tokens": 20}
    choice = post(server, "/v1/chat/completions", body)["choices"][0]
    entries = choice["logprobs"]["content"]
    assert [e["token"] for e in entries] == [f"token_id:{i}" for i in choice["token_ids"][
        :len(entries)]]
    assert all(t["token"].startswith("token_id:") for e in entries for t in e["top_logprobs"])
    assert bytes(entries[0]["bytes"]).decode() == "alpha"  # the token's own text
    completion = post(server, "/v1/completions", {
        "prompt": "[script] go", "logprobs": 1, "return_tokens_as_token_ids": True,
        "max_tokens": 3})["choices"][0]["logprobs"]
    assert all(t.startswith("token_id:") for t in completion["tokens"])
    assert all(k.startswith("token_id:") for top in completion["top_logprobs"] for k in top)


def test_include_reasoning_false_drops_the_reasoning(server: PythonServer) -> None:
    body = {"messages": user("[reason] 2+2?"), "max_tokens": 40, "logprobs": True,
            "return_token_ids": True}
    shown = post(server, "/v1/chat/completions", body)
    assert shown["choices"][0]["message"]["reasoning_content"] == "Two plus two is 4."
    hidden = post(server, "/v1/chat/completions", {**body, "include_reasoning": False})
    choice = hidden["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": "The answer is 4.",
                                 "reasoning_content": None}
    assert choice["logprobs"] is None and "token_ids" not in choice  # they would show it
    assert "prompt_token_ids" in hidden
    reasoning_tokens = hidden["usage"]["completion_tokens_details"]["reasoning_tokens"]
    assert reasoning_tokens == shown["usage"]["completion_tokens_details"][
        "reasoning_tokens"] > 0
    chunks = events(server, "/v1/chat/completions", {**body, "include_reasoning": False})
    deltas = [c["choices"][0] for c in chunks if c["choices"]]
    assert all("reasoning_content" not in d["delta"] for d in deltas)
    assert all(d["logprobs"] is None and "token_ids" not in d for d in deltas)
    assert "".join(d["delta"].get("content", "") for d in deltas) == "The answer is 4."


def test_separate_reasoning_false_puts_it_into_content(server: PythonServer) -> None:
    body = {"messages": user("[reason] 2+2?"), "max_tokens": 40, "separate_reasoning": False}
    message = post(server, "/v1/chat/completions", body)["choices"][0]["message"]
    assert message == {"role": "assistant",
                       "content": "Two plus two is 4.The answer is 4.",
                       "reasoning_content": None}
    chunks = events(server, "/v1/chat/completions", body)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert all("reasoning_content" not in d for d in deltas)
    assert "".join(d.get("content", "") for d in deltas) == message["content"]
    both = post(server, "/v1/chat/completions", {**body, "include_reasoning": False})
    assert both["choices"][0]["message"]["content"] == "The answer is 4."


def rendered(server: PythonServer, **fields: Any) -> str:
    body = {"messages": user("[script] hi"), "max_tokens": 1, "return_token_ids": True,
            **fields}
    return detokenize(server, post(server, "/v1/chat/completions", body)["prompt_token_ids"])


def test_reasoning_effort_is_the_templates_enable_thinking(server: PythonServer) -> None:
    # the demo template opens a think block when enable_thinking is true
    assert not rendered(server).endswith("<think>")
    assert rendered(server, reasoning_effort="low").endswith("<think>")
    assert not rendered(server, reasoning_effort="none").endswith("<think>")
    # the request's own enable_thinking wins
    assert not rendered(server, reasoning_effort="high",
                        chat_template_kwargs={"enable_thinking": False}).endswith("<think>")
    # Responses' reasoning.effort takes the same path (no refusal)
    answer = post(server, "/v1/responses", {"input": "[reason] x", "max_output_tokens": 40,
                                            "reasoning": {"effort": "low"}})
    assert answer["reasoning"]["effort"] == "low"
    kinds = [item["type"] for item in answer["output"]]
    assert kinds == ["reasoning", "message"]


def test_truncation_keeps_the_side_asked_for(server: PythonServer) -> None:
    prompt = "one two three four five six seven eight"
    ids = post(server, "/tokenize", {"prompt": prompt})["tokens"]
    base = {"prompt": prompt, "max_tokens": 1, "return_token_ids": True, "echo": True}
    left = post(server, "/v1/completions", {**base, "truncate_prompt_tokens": 3,
                                            "truncation_side": "left"})
    assert left["choices"][0]["prompt_token_ids"] == ids[-3:]
    assert left["usage"]["prompt_tokens"] == 3
    assert left["choices"][0]["text"].startswith(detokenize(server, ids[-3:]))
    right = post(server, "/v1/completions", {**base, "truncate_prompt_tokens": 3})
    assert right["choices"][0]["prompt_token_ids"] == ids[:3]  # the tokenizer's side
    whole = post(server, "/v1/completions", {**base, "truncate_prompt_tokens": -1})
    assert whole["choices"][0]["prompt_token_ids"] == ids  # shorter than the context
    chat = post(server, "/v1/chat/completions", {
        "messages": user("[script] hi"), "max_tokens": 1, "return_token_ids": True,
        "truncate_prompt_tokens": 4, "truncation_side": "left"})
    assert chat["prompt_token_ids"] == chat_prompt_ids(server, user("[script] hi"))[-4:]
    assert chat["usage"]["prompt_tokens"] == 4


def test_messages_sent_back_as_the_sdk_returns_them(server: PythonServer) -> None:
    sent_back = {"role": "assistant", "content": "Fine.", "refusal": None, "annotations": [],
                 "audio": None, "function_call": {"name": "old", "arguments": "{}"},
                 "reasoning": "I was asked."}
    messages = [*user("[script] hi"), sent_back, *user("again")]
    prompt = rendered(server, messages=messages)
    assert "<think>I was asked.</think>" in prompt  # the demo template's reasoning
    assert "old" not in prompt  # vLLM drops function_call


def test_guided_fields_constrain_and_are_logged_once(server: PythonServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guided, "_warned", False)  # the server runs in this process
    for _ in range(2):
        choice = post(server, "/v1/completions", {
            "prompt": "pick", "max_tokens": 10, "guided_choice": ["yes", "no"],
            "guided_decoding_backend": "xgrammar"})["choices"][0]
        assert choice["text"] in ("yes", "no")
    assert server.log().count("vLLM's removed guided decoding") == 1
    refused = server.post("/v1/chat/completions", {
        "messages": user("x"), "guided_json": {"type": "object"},
        "response_format": {"type": "json_object"}})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "guided_json"
