"""``POST /v1/chat/completions/batch`` over HTTP (the Python server in-process, the mock
engine): one choice per conversation, the usage of all, each conversation's own echo. The
errors are rows of tests/request_cases/bad_requests.json; vrs-rs's twin:
rust/server/src/routes/chat_batch/tests.rs."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.server_kit import MODEL, PythonServer

pytestmark = pytest.mark.server

PATH = "/v1/chat/completions/batch"


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def test_one_choice_per_conversation(python_server: PythonServer) -> None:
    batch = [user("please echo me"), user("x y z"), user("echo me too")]
    body = {"model": MODEL, "messages": batch, "max_tokens": 3, "seed": 1}
    answer = python_server.post(PATH, body)
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["id"].startswith("chatcmpl-") and reply["object"] == "chat.completion"
    choices = reply["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    assert [(c["message"]["content"], c["finish_reason"]) for c in choices[::2]] == [
        ("sure", "stop")] * 2
    assert choices[1]["finish_reason"] == "length"
    prompt = completion = 0
    for i, conversation in enumerate(batch):
        alone = python_server.post("/v1/chat/completions",
                                   {**body, "messages": conversation}).json()
        assert alone["choices"][0]["message"] == choices[i]["message"]
        prompt += alone["usage"]["prompt_tokens"]
        completion += alone["usage"]["completion_tokens"]
    assert (reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"]) == (
        prompt, completion)


def test_echo_is_each_conversations_own(python_server: PythonServer) -> None:
    ending = [*user("hi"), {"role": "assistant", "content": "PRE "}]
    body = {"model": MODEL, "messages": [user("please echo me"), ending], "max_tokens": 1,
            "echo": True, "add_generation_prompt": False, "continue_final_message": True}
    answer = python_server.post(PATH, body)
    assert answer.status_code == 200, answer.text
    choices = answer.json()["choices"]
    assert not choices[0]["message"]["content"].startswith("PRE")
    assert choices[1]["message"]["content"].startswith("PRE ")
