"""Batched completions prompts over HTTP (the Python server in-process, the mock engine): choice
``i * n + j``, usage counting each prompt once, streamed and not, and the ``prompt``
errors (``--max-batch-prompts`` is 4 on the shared server)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

# The first prompt gets the scripted reply "sure" (then EOS); the others random tokens.
PROMPTS: list[Any] = ["please echo me", "x y z", "日本"]


def sse(server: PythonServer, path: str, body: dict[str, Any]) -> list[Any]:
    """The events of a streamed answer (``[DONE]`` last, checked and dropped)."""
    with httpx.stream(
        "POST", f"{server.url}{path}", json={"model": MODEL, **body}, timeout=60
    ) as response:
        assert response.status_code == 200, response.read()
        lines = [line for line in response.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]


def prompt_lengths(server: PythonServer) -> list[int]:
    lengths = []
    for prompt in PROMPTS:
        body = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 1}).json()
        lengths.append(body["usage"]["prompt_tokens"])
    return lengths


def test_batched_prompts_with_n_two(python_server: PythonServer) -> None:
    body = {"prompt": PROMPTS, "n": 2, "max_tokens": 4, "seed": 3}
    response = python_server.post("/v1/completions", body)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["id"].startswith("cmpl-")
    choices = answer["choices"]
    assert [c["index"] for c in choices] == list(range(6))
    assert [(c["text"], c["finish_reason"]) for c in choices[:2]] == [("sure", "stop")] * 2
    assert [c["finish_reason"] for c in choices[2:]] == ["length"] * 4
    # Choice i * n + j answers prompt i: the same seeded request alone gives its text.
    completion = 0
    for i, prompt in enumerate(PROMPTS):
        alone = python_server.post("/v1/completions", {**body, "prompt": prompt}).json()
        assert [(c["text"], c["finish_reason"]) for c in alone["choices"]] == [
            (choices[i * 2 + j]["text"], choices[i * 2 + j]["finish_reason"]) for j in range(2)
        ]
        completion += alone["usage"]["completion_tokens"]
    prompt = sum(prompt_lengths(python_server))  # each prompt once, not once per choice
    assert answer["usage"] == {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},  # the mock engine has no prefix cache
    }


def test_batched_prompts_streamed(python_server: PythonServer) -> None:
    body = {
        "prompt": PROMPTS,
        "n": 2,
        "max_tokens": 4,
        "seed": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events = sse(python_server, "/v1/completions", body)
    whole = python_server.post(
        "/v1/completions", {**body, "stream": False, "stream_options": None}
    ).json()
    assert len({event["id"] for event in events}) == 1
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    for event in events[:-1]:
        (choice,) = event["choices"]
        texts[choice["index"]] = texts.get(choice["index"], "") + choice["text"]
        if choice["finish_reason"]:
            assert choice["index"] not in finishes, "one finish per choice"
            finishes[choice["index"]] = choice["finish_reason"]
    assert texts == {c["index"]: c["text"] for c in whole["choices"]}
    assert finishes == {c["index"]: c["finish_reason"] for c in whole["choices"]}
    assert sorted(finishes) == list(range(6))
    assert events[-1]["choices"] == [] and events[-1]["usage"] == whole["usage"]


@pytest.mark.parametrize(
    "prompt, words",
    [
        ([], "must not be an empty list"),
        (["a", ""], "prompt 1 is empty"),
        ([[5], []], "prompt 1 is empty"),
        (["a"] * 5, "at most 4 in one request (--max-batch-prompts)"),
        ([[1], [10**9]], "out of the vocabulary"),
        (["a", 1], "a list of lists of token ids"),
        (["a", [1, 2]], "a list of lists of token ids"),  # mixed: refused, as vLLM
    ],
)
def test_bad_batches_are_400_naming_prompt(
    python_server: PythonServer, prompt: Any, words: str
) -> None:
    response = python_server.post("/v1/completions", {"prompt": prompt, "max_tokens": 2})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "prompt" and words in error["message"], error


def test_one_prompt_over_the_context_fails_the_whole_batch(python_server: PythonServer) -> None:
    response = python_server.post("/v1/completions", {"prompt": [[5], [5] * 2047], "max_tokens": 2})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == "max_tokens" and "2049 tokens" in error["message"], error
