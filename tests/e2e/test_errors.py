"""Bad requests get the same status, error type, param and message words from every
frontend (each case runs once per request mode), and the server goes on serving.

The table is tests/request_cases/bad_requests.json (tests/bad_requests.py reads it), which
tests/server/test_bad_requests.py and vrs-rs's routes tests also run, in-process; here it
runs end to end, against the real tokenizer of the demo model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from server.validate.prompt import DEFAULT_MAX_BATCH_PROMPTS
from tests.bad_requests import ROOT, TABLE, Case, assert_case, assert_error, post
from tests.e2e.servers import MAX_MODEL_LEN, MODEL, Server

pytestmark = pytest.mark.e2e

USER = [{"role": "user", "content": "hi"}]


def test_these_servers_have_the_tables_settings(demo_model: Path) -> None:
    """The e2e servers (servers.py: the CLI's defaults and --max-model-len) serve what the
    cases assume."""
    settings = TABLE.settings
    config = json.loads((demo_model / "config.json").read_text())
    template = json.loads((demo_model / "tokenizer_config.json").read_text())["chat_template"]
    assert (settings.model, settings.max_model_len, settings.vocab_size,
            settings.max_batch_prompts) == (MODEL, MAX_MODEL_LEN, config["vocab_size"],
                                            DEFAULT_MAX_BATCH_PROMPTS)
    assert (ROOT / settings.chat_template).read_text(encoding="utf-8") == template


@pytest.mark.parametrize("case", TABLE.cases, ids=[case.id for case in TABLE.cases])
def test_bad_request_then_the_server_still_answers(server: Server, case: Case) -> None:
    assert_case(server.url, case)
    ok = server.client().completions.create(model=MODEL, prompt="hi", max_tokens=2)
    assert ok.usage.completion_tokens == 2


def test_body_over_the_limit_is_413(server: Server) -> None:
    content = b'{"prompt": "' + b"a" * (32 * 1024 * 1024) + b'"}'
    assert_error(post(server.url, "/v1/completions", content), 413, None,
                 "request body is larger than the limit of 32 MiB (32 MiB = 33554432 bytes); "
                 "raise --max-request-body")


def test_too_long_text_prompt_names_the_numbers(server: Server, tokenizer: Any) -> None:
    prompt = "hello " * 3000
    with pytest.raises(openai.BadRequestError) as info:
        server.client().completions.create(model=MODEL, prompt=prompt, max_tokens=4)
    message = info.value.body["message"]
    assert str(MAX_MODEL_LEN) in message and str(len(tokenizer.encode(prompt))) in message


def test_sdk_raises_typed_errors(server: Server) -> None:
    client = server.client()
    with pytest.raises(openai.BadRequestError, match="only allowed as the first message"):
        client.chat.completions.create(model=MODEL,
                                       messages=[*USER, {"role": "system", "content": "late"}])
    with pytest.raises(openai.NotFoundError, match="gpt-9"):
        client.chat.completions.create(model="gpt-9", messages=USER)
    with pytest.raises(openai.BadRequestError, match="foo"):
        client.chat.completions.create(model=MODEL, messages=USER, extra_body={"foo": 1})
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=USER, max_tokens=0)


def test_unknown_route_and_method(server: Server) -> None:
    assert_error(httpx.get(f"{server.url}/v2/nothing"), 404, None, "Not Found: /v2/nothing")
    resp = httpx.get(f"{server.url}/v1/completions")
    assert_error(resp, 405, None, "Method Not Allowed: GET /v1/completions")
    assert resp.headers["allow"] == "POST"
