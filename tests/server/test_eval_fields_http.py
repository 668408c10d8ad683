"""The evaluation fields over HTTP (the Python server in-process, the mock engine, whose prompt
logprobs are synthetic but well formed): echo with logprobs, ``max_tokens`` 0 with echo,
``prompt_logprobs`` on completions and chat, chat ``echo``, continuous usage stats."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import tokenizers

from tests.server.server_kit import PythonServer
from tests.server.test_batch_http import sse

pytestmark = pytest.mark.server

TEXT = "Hello there, 世界"


@pytest.fixture(scope="module")
def backend(demo_model: Path) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(demo_model / "tokenizer.json"))


def piece(backend: tokenizers.Tokenizer, token: int) -> str:
    """A token's text alone, special tokens kept (the logprobs' token text)."""
    return backend.decode([token], skip_special_tokens=False)


def check_echo_logprobs(
    logprobs: dict[str, Any], ids: list[int], k: int, backend: tokenizers.Tokenizer
) -> None:
    """The prompt part: a null first entry, each other's top-k plus itself, offsets that
    add up the token texts from 0."""
    n = len(ids)
    assert logprobs["tokens"][:n] == [piece(backend, t) for t in ids]
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    for i in range(1, n):
        value = logprobs["token_logprobs"][i]
        top = logprobs["top_logprobs"][i]
        assert -9999.0 <= value < 0
        assert top[logprobs["tokens"][i]] == value, "the token itself is among its top"
        assert k <= len(top) <= k + 1
    offsets = [0]
    for token in logprobs["tokens"][:-1]:
        offsets.append(offsets[-1] + len(token))
    assert logprobs["text_offset"] == offsets


def test_echo_with_logprobs(python_server: PythonServer, backend: tokenizers.Tokenizer) -> None:
    ids = backend.encode(TEXT, add_special_tokens=True).ids
    body = {
        "prompt": TEXT,
        "echo": True,
        "logprobs": 2,
        "max_tokens": 3,
        "seed": 4,
        "ignore_eos": True,
    }
    answer = python_server.post("/v1/completions", body).json()
    plain = python_server.post("/v1/completions", {**body, "echo": False}).json()
    choice = answer["choices"][0]
    assert choice["text"] == TEXT + plain["choices"][0]["text"]
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(ids) + 3
    check_echo_logprobs(logprobs, ids, 2, backend)
    generated = plain["choices"][0]["logprobs"]
    assert logprobs["tokens"][len(ids) :] == generated["tokens"]
    assert logprobs["token_logprobs"][len(ids) :] == generated["token_logprobs"]
    assert answer["usage"]["completion_tokens"] == 3
    # Streamed: the first chunk has the prompt and its logprobs, the rest follow.
    events = sse(python_server, "/v1/completions", {**body, "stream": True})
    first = events[0]["choices"][0]
    assert first["text"].startswith(TEXT)
    assert first["logprobs"]["token_logprobs"][0] is None
    joined: dict[str, list[Any]] = {key: [] for key in logprobs}
    for event in events:
        for key in joined:
            joined[key] += event["choices"][0]["logprobs"][key]
    assert joined == logprobs
    assert "".join(e["choices"][0]["text"] for e in events) == choice["text"]


@pytest.mark.parametrize("stream", [False, True])
def test_max_tokens_zero_with_echo_is_the_prompt_only(
    python_server: PythonServer, backend: tokenizers.Tokenizer, stream: bool
) -> None:
    ids = [1000, 2000, 3000]
    body = {"prompt": ids, "max_tokens": 0, "echo": True, "logprobs": 1}
    if stream:
        events = sse(
            python_server,
            "/v1/completions",
            {**body, "stream": True, "stream_options": {"include_usage": True}},
        )
        (choice,) = events[0]["choices"]
        assert [e["choices"] for e in events[1:]] == [[]]
        usage = events[-1]["usage"]
    else:
        answer = python_server.post("/v1/completions", body).json()
        (choice,) = answer["choices"]
        usage = answer["usage"]
    assert choice["text"] == backend.decode(ids)
    assert choice["finish_reason"] == "length"
    assert usage == {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3,
                     "prompt_tokens_details": {"cached_tokens": 0}}
    assert len(choice["logprobs"]["tokens"]) == 3
    check_echo_logprobs(choice["logprobs"], ids, 1, backend)
    refused = python_server.post("/v1/completions", {"prompt": ids, "max_tokens": 0})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "max_tokens"


def check_prompt_logprobs(
    entries: list[Any], ids: list[int], k: int, backend: tokenizers.Tokenizer
) -> None:
    assert len(entries) == len(ids) and entries[0] is None
    for token, entry in zip(ids[1:], entries[1:], strict=True):
        keys = list(entry)
        assert keys[0] == str(token), "the prompt token comes first"
        assert all(key.isdigit() for key in keys)
        assert len(entry) in (k, k + 1)
        actual = entry[str(token)]
        assert actual["decoded_token"] == piece(backend, token)
        assert actual["rank"] >= 1 and -9999.0 <= actual["logprob"] < 0
        tops = [entry[key] for key in keys[1:]]
        assert [t["rank"] for t in tops] == sorted(t["rank"] for t in tops)
        assert all(
            t["decoded_token"] == piece(backend, int(key))
            for key, t in zip(keys[1:], tops, strict=True)
        )


def test_completion_prompt_logprobs(
    python_server: PythonServer, backend: tokenizers.Tokenizer
) -> None:
    ids = backend.encode("abc def ghi", add_special_tokens=True).ids
    body = {"prompt": [ids, ids], "n": 2, "max_tokens": 2, "prompt_logprobs": 2}
    answer = python_server.post("/v1/completions", body).json()
    entries = [c["prompt_logprobs"] for c in answer["choices"]]
    assert len(entries) == 4 and all(e == entries[0] for e in entries)
    check_prompt_logprobs(entries[0], ids, 2, backend)
    assert "logprobs" in answer["choices"][0] and answer["choices"][0]["logprobs"] is None
    plain = python_server.post("/v1/completions", {"prompt": "abc", "max_tokens": 1}).json()
    assert "prompt_logprobs" not in plain["choices"][0]
    events = sse(python_server, "/v1/completions", {**body, "stream": True})
    firsts: dict[int, Any] = {}
    for event in events:
        (choice,) = event["choices"]
        if choice["index"] not in firsts:
            firsts[choice["index"]] = choice.get("prompt_logprobs")
        else:
            assert "prompt_logprobs" not in choice, "only on a choice's first chunk"
    assert firsts == dict.fromkeys(range(4), entries[0])


def test_chat_echo_and_prompt_logprobs(
    python_server: PythonServer, backend: tokenizers.Tokenizer
) -> None:
    messages = [
        {"role": "user", "content": "Say it."},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "The answer"}, {"type": "text", "text": "is"}],
        },
    ]
    body = {
        "messages": messages,
        "echo": True,
        "prompt_logprobs": 1,
        "max_tokens": 3,
        "seed": 5,
        "n": 2,
        "add_generation_prompt": False,
        "continue_final_message": True,
    }
    answer = python_server.post("/v1/chat/completions", body).json()
    plain = python_server.post("/v1/chat/completions", {**body, "echo": False}).json()
    for echoed, alone in zip(answer["choices"], plain["choices"], strict=True):
        assert echoed["message"]["content"] == "The answer\nis" + alone["message"]["content"]
    rendered = python_server.post(
        "/tokenize",
        {"messages": messages, "add_generation_prompt": False, "continue_final_message": True},
    ).json()
    check_prompt_logprobs(answer["prompt_logprobs"], rendered["tokens"], 1, backend)
    assert list(answer)[-1] == "prompt_logprobs"
    events = sse(python_server, "/v1/chat/completions", {**body, "stream": True})
    deltas = [(e["choices"][0]["index"], e["choices"][0]["delta"]) for e in events]
    assert deltas[:4] == [
        (0, {"role": "assistant", "content": ""}),
        (1, {"role": "assistant", "content": ""}),
        (0, {"content": "The answer\nis"}),
        (1, {"content": "The answer\nis"}),
    ]
    carrying = [e for e in events if "prompt_logprobs" in e]
    assert len(carrying) == 1 and carrying[0] is events[0], "on the very first chunk"
    assert carrying[0]["prompt_logprobs"] == answer["prompt_logprobs"]
    # Echo needs the last message to be the assistant's: otherwise it changes nothing.
    user_last = {"messages": messages[:1], "echo": True, "max_tokens": 3, "seed": 5}
    echoed = python_server.post("/v1/chat/completions", user_last).json()
    alone = python_server.post("/v1/chat/completions", {**user_last, "echo": False}).json()
    assert echoed["choices"] == alone["choices"]


@pytest.mark.parametrize(
    "path, body",
    [
        ("/v1/completions", {"prompt": ["one", "two words"], "n": 2, "echo": True}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "n": 2}),
    ],
)
def test_continuous_usage_on_every_chunk(
    python_server: PythonServer, path: str, body: dict[str, Any]
) -> None:
    events = sse(
        python_server,
        path,
        {
            **body,
            "max_tokens": 5,
            "seed": 12,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        },
    )
    generated: dict[int, int] = {}
    prompts: dict[int, int] = {}
    for event in events[:-1]:
        (choice,) = event["choices"]
        usage = event["usage"]
        index = choice["index"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
        assert usage["prompt_tokens_details"] == {"cached_tokens": 0}  # the mock: no cache
        assert usage["completion_tokens"] >= generated.get(index, 0)
        assert prompts.setdefault(index, usage["prompt_tokens"]) == usage["prompt_tokens"]
        generated[index] = usage["completion_tokens"]
    assert generated == {index: 5 for index in generated} and len(generated) == len(prompts)
    final = events[-1]
    assert final["choices"] == []
    assert final["usage"]["completion_tokens"] == sum(generated.values())
    assert final["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    # Without include_usage it changes nothing.
    quiet = sse(
        python_server,
        path,
        {
            **body,
            "max_tokens": 2,
            "stream": True,
            "stream_options": {"continuous_usage_stats": True},
        },
    )
    assert all("usage" not in event for event in quiet)
