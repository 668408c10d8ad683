"""The Python frontend's request checks that have no engine in them: the /invocations
routing, the 413 message, the key policy of vLLM's extensions and the field a
context-length error names (the e2e suite runs the same cases over HTTP on every
frontend; these pin the exact words shared with the Rust unit tests)."""

from __future__ import annotations

import json

import pytest

from server.edge.error import APIError, mib, payload_too_large
from server.routes.invocations import NO_HANDLER, is_chat
from server.validate import params

pytestmark = pytest.mark.unit

USER = [{"role": "user", "content": "hi"}]


def error_of(call: object, *args: object) -> APIError:
    with pytest.raises(APIError) as info:
        call(*args)  # type: ignore[operator]
    return info.value


def test_the_body_picks_the_endpoint() -> None:
    assert is_chat(b'{"messages": []}') is True
    assert is_chat(b'{"prompt": "x", "n": 2}') is False
    assert is_chat(b'{"prompt": "x", "messages": [{"role": "user"}]}') is True  # chat first
    assert is_chat(b'{"messages": null, "prompt": [1, 2]}') is False  # null is absent
    for body in (b'{"x": {"messages": []}}', b'{"model": "m", "messages": null}', b"{}",
                 b'{"a": 1e400}'):
        error = error_of(is_chat, body)
        assert (error.status, error.param, error.message) == (400, None, NO_HANDLER), body


@pytest.mark.parametrize("body, words", [
    (b"  ", "empty"), (b'{"messages": [', "invalid JSON"),
    (b"[1, 2]", "the request body must be a JSON object"),
    (b"null", "the request body must be a JSON object"),
])
def test_a_body_that_is_no_object_gets_the_endpoints_errors(body: bytes, words: str) -> None:
    error = error_of(is_chat, body)
    assert error.status == 400 and words in error.message


def test_too_large_names_the_limit_in_mib_and_the_flag() -> None:
    serving = payload_too_large(32 * 1024 * 1024, "--max-request-body")
    assert serving.status == 413 and serving.param is None
    assert serving.message == ("request body is larger than the limit of 32 MiB "
                               "(32 MiB = 33554432 bytes); raise --max-request-body")
    assert payload_too_large(65536).message == (
        "request body is larger than the limit of 0.0625 MiB (0.0625 MiB = 65536 bytes)")
    assert mib(1) == "0.00000095367431640625"
    assert mib(1000) == "0.00095367431640625"
    assert (mib(3 * 1024 * 1024 + 512 * 1024), mib(0)) == ("3.5", "0")


COMMON_EXTENSIONS = {
    "return_token_ids": True, "return_tokens_as_token_ids": True, "truncate_prompt_tokens": 5,
    "truncation_side": "left", "guided_json": {"type": "object"}, "guided_regex": "a",
    "guided_choice": ["a"], "guided_grammar": "root ::= \"a\"",
    "guided_whitespace_pattern": "x", "guided_decoding_backend": "xgrammar"}
CHAT_EXTENSIONS = {"reasoning_effort": "low", "include_reasoning": False,
                   "separate_reasoning": False}


def test_vllm_extensions_are_known_fields_of_their_endpoints() -> None:
    """Known keys (their values are checked later), the chat ones unknown on completions."""
    chat = params.decode(json.dumps({"messages": USER, **COMMON_EXTENSIONS,
                                     **CHAT_EXTENSIONS}).encode(), True)
    assert (chat.truncate_prompt_tokens, chat.reasoning_effort) == (5, "low")
    completion = params.decode(json.dumps({"prompt": "x", **COMMON_EXTENSIONS}).encode(), False)
    assert completion.guided_decoding_backend == "xgrammar"
    for key, value in CHAT_EXTENSIONS.items():
        error = error_of(params.decode, json.dumps({"prompt": "x", key: value}).encode(), False)
        assert (error.status, error.param, error.message) == (400, key, f"unknown field `{key}`")
    huge = json.dumps({"prompt": "x", "truncate_prompt_tokens": 2**63}).encode()
    error = error_of(params.decode, huge, False)
    assert (error.status, error.param) == (400, "truncate_prompt_tokens")


def test_context_errors_name_the_field_the_request_used() -> None:
    for field in ("max_tokens", "max_completion_tokens"):
        error = error_of(params.resolve_max_tokens, 91, field, 10, 100, "messages")
        assert (error.status, error.param) == (400, field)
        assert "maximum context length is 100" in error.message
    chat = params.decode(json.dumps({"messages": USER, "max_completion_tokens": 3}).encode(),
                         True)
    settings = params.validate(chat, ("max_completion_tokens", 3), 100)
    assert (settings.max_tokens, settings.max_tokens_field) == (3, "max_completion_tokens")
    plain = params.decode(json.dumps({"messages": USER, "max_tokens": 3}).encode(), True)
    assert params.validate(plain, None, 100).max_tokens_field == "max_tokens"
