"""``priority``, ``cache_salt``, ``thinking_token_budget``, ``vllm_xargs`` and
``kv_transfer_params`` over HTTP, the Python frontend in-process over the mock engine:
bad values are 400s naming the field, ``priority`` needs ``--scheduling-policy
priority`` and then orders the queue, a thinking budget (chat's, and Anthropic's
``thinking.budget_tokens``) cuts the reasoning at the budget, and ``kv_transfer_params``
is served with vLLM's warning (no KV connector). tests/e2e/test_engine_fields.py has
the real engine behind both frontends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tokenizers

from tests.server.server_kit import PythonServer

pytestmark = pytest.mark.server

USER = [{"role": "user", "content": "hi"}]
THINK = "please think"
THOUGHT = "one two three four five six seven"
LONG_THOUGHT = "a " * 1100


@pytest.mark.parametrize("route, extra, param, words", [
    ("chat", {"priority": 1}, "priority", "Got priority 1 but Priority scheduling is not "
                                          "enabled"),
    ("completions", {"priority": "high"}, "priority", "must be an integer"),
    ("completions", {"priority": 2**63}, "priority", "must be an integer"),
    ("chat", {"cache_salt": ""}, "cache_salt", "non-empty string"),
    ("completions", {"cache_salt": "a@b"}, "cache_salt", "at most 128 characters"),
    ("chat", {"kv_transfer_params": "x"}, "kv_transfer_params", "must be an object"),
    ("completions", {"vllm_xargs": {"k": {"n": 1}}}, "vllm_xargs", "`k` is another value"),
    ("chat", {"vllm_xargs": {"k": [None]}}, "vllm_xargs", "`k` holds another value"),
    ("chat", {"thinking_token_budget": -5}, "thinking_token_budget", "-1 for unlimited"),
    ("chat", {"thinking_token_budget": 3, "response_format": {"type": "json_object"}},
     "thinking_token_budget", "cannot be combined with `response_format`"),
    ("chat", {"thinking_token_budget": 3, "tool_choice": "required",
              "tools": [{"type": "function", "function": {"name": "f"}}]},
     "tool_choice", "cannot be combined with `thinking_token_budget`"),
])
def test_bad_values_are_400_naming_the_field(
    python_server: PythonServer, route: str, extra: dict[str, Any], param: str, words: str
) -> None:
    body = {"messages": USER} if route == "chat" else {"prompt": "x"}
    path = f"/v1/{'chat/' if route == 'chat' else ''}completions"
    response = python_server.post(path, {**body, "max_tokens": 2, **extra})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "BadRequestError", error
    assert words in error["message"], error


def test_good_values_are_served(python_server: PythonServer) -> None:
    extra = {"priority": 0, "cache_salt": "tenant-🧂", "vllm_xargs": {"a": [1, "b", 2.5]},
             "kv_transfer_params": {"do_remote_prefill": False}, "thinking_token_budget": -1}
    for path, body in (("/v1/chat/completions", {"messages": USER}),
                       ("/v1/completions", {"prompt": "x"})):
        response = python_server.post(path, {**body, "max_tokens": 2, **extra})
        assert response.status_code == 200, response.text
    # vLLM without a KV connector: served, with its warning.
    deadline = time.monotonic() + 10
    while "Got kv_transfer_params, but no KVConnector found" not in python_server.log():
        assert time.monotonic() < deadline, python_server.log()
        time.sleep(0.05)


@pytest.fixture(scope="module")
def thinking_server(demo_model: Path,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[PythonServer]:
    """Scripted reasoning for prompts that say "please think"; priority scheduling, one
    request at a time."""
    server = PythonServer(
        demo_model, tmp_path_factory.mktemp("engine-fields") / "server.log",
        scheduling_policy="priority",
        engine={"max_num_seqs": 1, "mock_step_delay_ms": 2.0, "mock_replies": [
            {"when": THINK, "reply": f"{THOUGHT}</think>The answer."},
            {"when": "think long", "reply": f"{LONG_THOUGHT}</think>Done."}]},
    )
    yield server
    assert server.stop() == 0, server.log()


def _pieces(demo_model: Path, text: str, n: int) -> tuple[str, str]:
    """``text``'s first ``n`` tokens, and the rest, as the mock's script has them."""
    backend = tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))
    ids = backend.encode(text, add_special_tokens=False).ids
    return backend.decode(ids[:n]), backend.decode(ids[n:])


def test_the_budget_cuts_the_reasoning(thinking_server: PythonServer, demo_model: Path) -> None:
    body = {"messages": [{"role": "user", "content": THINK}], "max_tokens": 40,
            "chat_template_kwargs": {"enable_thinking": True}}
    free = thinking_server.post("/v1/chat/completions", body).json()
    assert free["choices"][0]["message"]["reasoning_content"] == THOUGHT
    # The prompt ends in "<think>": the budget counts the answer's first tokens, then
    # "</think>" is forced and the script resumes where it was, as content.
    cut = thinking_server.post("/v1/chat/completions", {**body, "thinking_token_budget": 3})
    message = cut.json()["choices"][0]["message"]
    thought, rest = _pieces(demo_model, THOUGHT, 3)
    assert message["reasoning_content"] == thought
    assert message["content"].startswith(rest), message
    assert cut.json()["usage"]["completion_tokens_details"]["reasoning_tokens"] == 4


def test_anthropic_budget_tokens_are_enforced(thinking_server: PythonServer,
                                              demo_model: Path) -> None:
    body = {"model": "demo", "max_tokens": 1500,
            "messages": [{"role": "user", "content": "think long"}],
            "thinking": {"type": "enabled", "budget_tokens": 1024}}
    answer = httpx.post(f"{thinking_server.url}/v1/messages", json=body, timeout=60).json()
    blocks = {block["type"]: block for block in answer["content"]}
    thought, _ = _pieces(demo_model, LONG_THOUGHT, 1024)
    assert blocks["thinking"]["thinking"] == thought


def test_priority_orders_the_queue(thinking_server: PythonServer) -> None:
    """One request runs at a time: of two waiting, the lower priority value goes first."""
    done: dict[str, float] = {}

    def post(name: str, level: int, tokens: int) -> None:
        response = thinking_server.post("/v1/completions", {
            "prompt": name, "max_tokens": tokens, "ignore_eos": True, "priority": level})
        assert response.status_code == 200, response.text
        done[name] = time.monotonic()

    first = threading.Thread(target=post, args=("first", 0, 150))
    first.start()
    time.sleep(0.1)  # "first" holds the one slot (150 steps of 2 ms)
    later = [threading.Thread(target=post, args=(name, level, 5))
             for name, level in (("low", 7), ("high", -7))]
    for thread in later:
        thread.start()
        time.sleep(0.02)
    for thread in (first, *later):
        thread.join(60)
    assert done["high"] < done["low"], done


def test_anthropic_thinking_refuses_a_forced_tool_call(thinking_server: PythonServer) -> None:
    body = {"model": "demo", "max_tokens": 1500,
            "messages": [{"role": "user", "content": "hi"}],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "tools": [{"name": "f", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"}}
    response = httpx.post(f"{thinking_server.url}/v1/messages", json=body, timeout=60)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert "cannot be combined with `thinking_token_budget`" in error["message"], error
