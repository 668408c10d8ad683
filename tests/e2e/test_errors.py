"""Bad requests get the same status, error type, param and message words from every
frontend (each case runs once per request mode), and the server goes on serving."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.servers import MAX_MODEL_LEN, MODEL, Server

pytestmark = pytest.mark.e2e

LONG = [1000] * (MAX_MODEL_LEN + 10)
USER = [{"role": "user", "content": "hi"}]
TYPES = {400: "BadRequestError", 404: "NotFoundError", 405: "MethodNotAllowedError",
         413: "PayloadTooLargeError", 503: "ServiceUnavailableError"}
BAD_REQUESTS = [
    # (id, route, body, status, param, words the message must contain)
    ("malformed-json", "chat", b'{"messages": [', 400, None, "invalid JSON"),
    ("empty-body", "chat", b"  ", 400, None, "empty"),
    ("not-an-object", "chat", [1, 2], 400, None, "JSON object"),
    ("wrong-type", "chat", {"messages": USER, "max_tokens": "ten"}, 400, "max_tokens",
     "max_tokens"),
    ("missing-messages", "chat", {"model": MODEL}, 400, "messages", "required"),
    ("null-messages", "chat", {"messages": None}, 400, "messages", "required"),
    ("empty-messages", "chat", {"messages": []}, 400, "messages", "empty"),
    ("missing-role", "chat", {"messages": [{"content": "x"}]}, 400, "messages[0]", "role"),
    ("unknown-message-field", "chat", {"messages": [{"role": "user", "content": "x",
                                                     "colour": 1}]}, 400,
     "messages[0].colour", "unknown field `colour`"),
    ("unknown-stream-option", "chat", {"messages": USER, "stream": True, "stream_options": {
        "x": 1}}, 400, "stream_options.x", "unknown field `x`"),
    ("unknown-role", "chat", {"messages": [{"role": "wizard", "content": "x"}]}, 400, None,
     "unknown role: wizard"),
    ("image-part", "chat", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]}, 400,
     "messages[0].content[0]", "image_url"),
    ("text-part-without-text", "chat", {"messages": [{"role": "user", "content": [
        {"type": "text"}]}]}, 400, "messages[0].content[0]", "text"),
    ("missing-prompt", "completions", {"model": MODEL}, 400, "prompt", "required"),
    ("batch-over-the-limit", "completions", {"prompt": ["a"] * 257}, 400, "prompt",
     "--max-batch-prompts"),
    ("batch-mixed", "completions", {"prompt": ["a", [1, 2]]}, 400, "prompt", "prompt"),
    ("batch-empty", "completions", {"prompt": []}, 400, "prompt", "prompt"),
    ("batch-empty-string", "completions", {"prompt": ["a", ""]}, 400, "prompt", "prompt"),
    ("batch-token-outside-vocab", "completions", {"prompt": [[1], [10**9]]}, 400, "prompt",
     "out of the vocabulary"),
    ("logit-bias-key", "chat", {"messages": USER, "logit_bias": {"abc": 1}}, 400,
     "logit_bias", "abc"),
    ("logit-bias-value", "completions", {"prompt": "x", "logit_bias": {"5": 101}}, 400,
     "logit_bias", "101"),
    ("logit-bias-outside-vocab", "chat", {"messages": USER, "logit_bias": {"10000000": 1}},
     400, "logit_bias", "10000000"),
    ("allowed-token-ids-empty", "completions", {"prompt": "x", "allowed_token_ids": []}, 400,
     "allowed_token_ids", "allowed_token_ids"),
    ("allowed-token-ids-outside-vocab", "chat", {"messages": USER,
                                                 "allowed_token_ids": [1, 10**7]}, 400,
     "allowed_token_ids", "allowed_token_ids"),
    ("bad-words-not-strings", "chat", {"messages": USER, "bad_words": "x"}, 400, "bad_words",
     "bad_words"),
    ("prompt-logprobs-over-the-cap", "completions", {"prompt": "x", "prompt_logprobs": 21},
     400, "prompt_logprobs", "prompt_logprobs"),
    ("max-tokens-zero-without-echo", "completions", {"prompt": "x", "max_tokens": 0}, 400,
     "max_tokens", "at least 1"),
    ("mixed-prompt", "completions", {"prompt": [1, "a"]}, 400, "prompt", "prompt"),
    ("empty-prompt", "completions", {"prompt": ""}, 400, "prompt", "no tokens"),
    ("token-outside-vocab", "completions", {"prompt": [1, 10**9]}, 400, "prompt",
     "out of the vocabulary"),
    ("unknown-model", "chat", {"model": "gpt-9", "messages": USER}, 404, "model",
     "The model `gpt-9` does not exist."),
    ("unknown-field", "chat", {"messages": USER, "foo": 1}, 400, "foo", "unknown field `foo`"),
    ("unknown-fields", "chat", {"messages": USER, "foo": 1, "bar": 2}, 400, "bar",
     "unknown fields: `bar`, `foo`"),
    ("chat-only-field-on-completions", "completions", {"prompt": "x", "tools": []}, 400,
     "tools", "unknown field"),
    ("temperature", "chat", {"messages": USER, "temperature": -1}, 400, "temperature",
     "got -1"),
    ("top-p", "chat", {"messages": USER, "top_p": 0}, 400, "top_p", "(0, 1]"),
    ("top-k", "chat", {"messages": USER, "top_k": -5}, 400, "top_k", "-5"),
    ("repetition-penalty", "chat", {"messages": USER, "repetition_penalty": 3}, 400,
     "repetition_penalty", "(0, 2]"),
    ("seed-out-of-range", "chat", {"messages": USER, "seed": 2**64}, 400, "seed", "seed"),
    ("empty-stop", "chat", {"messages": USER, "stop": [""]}, 400, "stop", "empty"),
    ("stop-token-outside-vocab", "chat", {"messages": USER, "stop_token_ids": [10**7]}, 400,
     "stop_token_ids", "vocabulary"),
    ("negative-stop-token", "chat", {"messages": USER, "stop_token_ids": [-1]}, 400,
     "stop_token_ids[0]", "stop_token_ids"),
    ("max-tokens-zero", "chat", {"messages": USER, "max_tokens": 0}, 400, "max_tokens",
     "at least 1"),
    ("min-over-max", "chat", {"messages": USER, "max_tokens": 2, "min_tokens": 3}, 400,
     "min_tokens", "must not exceed"),
    ("stream-options-without-stream", "chat", {"messages": USER, "stream_options": {
        "include_usage": True}}, 400, "stream_options", "stream"),
    ("reserved-template-kwarg", "chat", {"messages": USER, "chat_template_kwargs": {
        "messages": []}}, 400, None, "may not set"),
    ("generation-and-continue", "chat", {"messages": USER, "add_generation_prompt": True,
                                         "continue_final_message": True}, 400, None,
     "not compatible"),
    ("template-error", "chat", {"messages": [*USER, {"role": "system", "content": "late"}]},
     400, None, "a system message is only allowed as the first message"),
    ("prompt-too-long", "completions", {"prompt": LONG}, 400, "prompt",
     f"maximum context length is 2048 tokens. However, your request has {len(LONG)} input"),
    ("prompt-plus-max-tokens", "completions", {"prompt": [1000] * 2000, "max_tokens": 100},
     400, "max_tokens", "requested 2100 tokens (2000 in the prompt, 100 in the completion)"),
    ("max-completion-tokens", "chat", {"messages": USER, "max_completion_tokens": 10**6},
     400, "max_completion_tokens", "maximum context length"),
    ("max-completion-tokens-over-max-tokens", "chat", {
        "messages": USER, "max_tokens": 5, "max_completion_tokens": 10**6}, 400,
     "max_completion_tokens", "maximum context length"),
    ("response-format-json-schema-without-it", "chat", {
        "messages": USER, "response_format": {"type": "json_schema"}}, 400,
     "response_format.json_schema",
     "`response_format.json_schema` must be an object with `name` and `schema`"),
    ("response-format-not-an-object", "chat", {"messages": USER, "response_format": "json"},
     400, "response_format", "the accepted types are `text`, `json_object` and `json_schema`"),
    ("response-format-unknown-type", "completions", {
        "prompt": "x", "response_format": {"type": "xml"}}, 400, "response_format",
     "`response_format` of type `xml` is not supported"),
    ("response-format-schema-not-an-object", "chat", {"messages": USER, "response_format": {
        "type": "json_schema", "json_schema": {"name": "n", "schema": "{}"}}}, 400,
     "response_format.json_schema.schema", "must be a JSON Schema object"),
    ("structured-outputs-empty", "completions", {"prompt": "x", "structured_outputs": {}},
     400, "structured_outputs", "`structured_outputs` must set one of `json`, `regex`"),
    ("structured-outputs-unknown-key", "chat", {"messages": USER, "structured_outputs": {
        "regex": "a", "backend": "outlines"}}, 400, "structured_outputs.backend",
     "unknown field `backend` in `structured_outputs`"),
    ("structured-outputs-empty-choice", "chat", {"messages": USER, "structured_outputs": {
        "choice": []}}, 400, "structured_outputs.choice", "must be a non-empty list of strings"),
    ("structured-outputs-json-text", "completions", {"prompt": "x", "structured_outputs": {
        "json": "{oops"}}, 400, "structured_outputs.json", "must be a JSON Schema"),
    ("two-constraints", "chat", {"messages": USER, "response_format": {"type": "json_object"},
                                 "structured_outputs": {"regex": "[a-z]+"}}, 400,
     "structured_outputs.regex", "only one structured-output constraint may be given; this "
     "request sets `response_format` and `structured_outputs.regex`"),
    ("tool-choice-with-a-constraint", "chat", {
        "messages": USER, "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "required", "structured_outputs": {"choice": ["a"]}}, 400,
     "tool_choice", '`tool_choice` "required" cannot be combined with '
     "`structured_outputs.choice`"),
    ("guided-json", "chat", {"messages": USER, "guided_json": {"type": "object"}}, 400,
     "guided_json", "`guided_json` is not supported; use `structured_outputs.json`"),
    ("negative-max-tokens", "completions", {"prompt": "x", "max_tokens": -1}, 400,
     "max_tokens", "at least 1"),
    ("negative-temperature", "completions", {"prompt": "x", "temperature": -0.1}, 400,
     "temperature", ">= 0"),
    ("top-p-over-1", "completions", {"prompt": "x", "top_p": 1.5}, 400, "top_p", "(0, 1]"),
    ("content-not-text", "chat", {"messages": [{"role": "user", "content": 5}]}, 400,
     "messages[0].content", "invalid"),
    ("unknown-completions-field", "completions", {"prompt": "x", "frobnicate": True}, 400,
     "frobnicate", "unknown field"),
    ("max-tokens-over-context", "completions", {"prompt": "x", "max_tokens": 5000}, 400,
     "max_tokens", "maximum context length is 2048"),
]


def post(server: Server, route: str, content: bytes) -> httpx.Response:
    path = "/v1/chat/completions" if route == "chat" else "/v1/completions"
    return httpx.post(f"{server.url}{path}", content=content,
                      headers={"content-type": "application/json"}, timeout=60)


def assert_error(resp: httpx.Response, status: int, param: str | None, words: str) -> None:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    error = resp.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == (TYPES[status], status, param), error
    assert words in error["message"], error["message"]


@pytest.mark.parametrize("route, body, status, param, words",
                         [case[1:] for case in BAD_REQUESTS],
                         ids=[case[0] for case in BAD_REQUESTS])
def test_bad_request_then_the_server_still_answers(server: Server, route: str, body: Any,
                                                   status: int, param: str | None,
                                                   words: str) -> None:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    assert_error(post(server, route, content), status, param, words)
    ok = server.client().completions.create(model=MODEL, prompt="hi", max_tokens=2)
    assert ok.usage.completion_tokens == 2


def test_body_over_the_limit_is_413(server: Server) -> None:
    content = b'{"prompt": "' + b"a" * (32 * 1024 * 1024) + b'"}'
    assert_error(post(server, "completions", content), 413, None,
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
