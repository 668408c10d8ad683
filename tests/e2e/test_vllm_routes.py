"""vLLM 0.33's routes and rules of issue #39 in both request modes: batched chat
(`POST /v1/chat/completions/batch`; its errors are in tests/request_cases/bad_requests.json),
`GET /tokenizer_info` behind `--enable-tokenizer-info-endpoint`, and `model: ""` meaning the
served model (docs/api.md, "Batched chat", "/tokenizer_info", "Chat and completions request
fields")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.features import EXPECTED_SCRIPT, user
from tests.e2e.servers import MODEL, ROUTE_MODES, Server

pytestmark = pytest.mark.e2e


def test_batched_chat_answers_each_conversation(feature_server: Server) -> None:
    batch = [user("[script] please"), user("hello"), user("[script] again")]
    body = {"model": MODEL, "messages": batch, "max_tokens": 6, "seed": 3}
    answer = httpx.post(f"{feature_server.url}/v1/chat/completions/batch", json=body,
                        timeout=60)
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert reply["id"].startswith("chatcmpl-") and reply["object"] == "chat.completion"
    assert reply["model"] == MODEL
    choices = reply["choices"]
    assert [c["index"] for c in choices] == [0, 1, 2]
    assert [c["message"]["content"] for c in choices[::2]] == [EXPECTED_SCRIPT] * 2
    assert [c["finish_reason"] for c in choices] == ["stop", "length", "stop"]
    # Each conversation as a chat request of its own: the same answer and prompt.
    prompt = completion = 0
    for i, conversation in enumerate(batch):
        alone = httpx.post(f"{feature_server.url}/v1/chat/completions",
                           json={**body, "messages": conversation}, timeout=60).json()
        assert alone["choices"][0]["message"] == choices[i]["message"]
        prompt += alone["usage"]["prompt_tokens"]
        completion += alone["usage"]["completion_tokens"]
    assert (reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"]) == (
        prompt, completion)


def test_an_empty_model_is_the_served_one(server: Server) -> None:
    url = server.url
    chat = {"messages": user("hi"), "max_tokens": 1}
    for model in ("", None):
        answer = httpx.post(f"{url}/v1/chat/completions", json={**chat, "model": model},
                            timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == MODEL
    for path, body in (("/v1/completions", {"prompt": "hi", "max_tokens": 1}),
                       ("/v1/chat/completions/batch", {"messages": [user("hi")],
                                                       "max_tokens": 1}),
                       ("/v1/responses", {"input": "hi", "max_output_tokens": 1}),
                       ("/v1/messages", {"max_tokens": 1, "messages": user("hi")}),
                       ("/tokenize", {"prompt": "hi"}),
                       ("/detokenize", {"tokens": [1]})):
        answer = httpx.post(f"{url}{path}", json={**body, "model": ""}, timeout=60)
        assert answer.status_code == 200, (path, answer.text)
        missing = httpx.post(f"{url}{path}", json={**body, "model": "gpt-9"}, timeout=60)
        assert missing.status_code == 404, (path, missing.text)


def test_tokenizer_info_is_off_by_default(server: Server) -> None:
    answer = httpx.get(f"{server.url}/tokenizer_info", timeout=10)
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "NotFoundError"


@pytest.fixture(scope="module")
def info_servers(demo_model: Path,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    """One server per request mode with --enable-tokenizer-info-endpoint."""
    log = tmp_path_factory.mktemp("tokenizer-info")
    servers: dict[str, Server] = {}
    try:
        for mode in ROUTE_MODES:
            servers[mode] = Server(mode, demo_model, log / f"{mode}.log",
                                   cli_args=("--enable-tokenizer-info-endpoint",))
        yield servers
    finally:
        for server in servers.values():
            assert server.stop() == 0, server.log()


def plain(value: Any) -> Any:
    """An added token (an object with a string ``content``) as its text, as vLLM writes it."""
    if isinstance(value, dict):
        if isinstance(value.get("content"), str):
            return value["content"]
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def test_tokenizer_info_is_the_tokenizers_config(info_servers: dict[str, Server],
                                                 demo_model: Path, tokenizer: Any) -> None:
    answers = {}
    for mode, server in info_servers.items():
        answer = httpx.get(f"{server.url}/tokenizer_info", timeout=10)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/json")
        answers[mode] = answer.json()
    rust, python = answers["rust-serve"], answers["python"]
    assert rust == python
    assert list(rust) == list(python), "the same key order"
    config = json.loads((demo_model / "tokenizer_config.json").read_text(encoding="utf-8"))
    added = json.loads((demo_model / "tokenizer.json").read_text(encoding="utf-8"))
    for key, value in config.items():
        if key not in ("vocab_file", "merges_file"):
            assert rust[key] == plain(value), key
    assert rust["added_tokens_decoder"] == {
        str(t["id"]): t["content"] for t in added["added_tokens"]}
    assert rust["tokenizer_class"] == config.get("tokenizer_class", "PreTrainedTokenizerFast")
    assert rust["chat_template"] == tokenizer.chat_template
    # What vLLM answers for the keys transformers keeps from the config: the same values.
    for key, value in tokenizer.init_kwargs.items():
        if key in config and key not in ("added_tokens_decoder", "tokenizer_class"):
            assert rust[key] == getattr(value, "content", value), key
