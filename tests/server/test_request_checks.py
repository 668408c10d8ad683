"""The Python frontend's request checks that have no engine in them: the /invocations
routing, the 413 message, the ``guided_*`` refusals and the field a
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


@pytest.mark.parametrize("key", ["guided_json", "guided_regex", "guided_choice",
                                 "guided_grammar"])
def test_guided_fields_name_their_structured_outputs_key(key: str) -> None:
    body = json.dumps({"messages": USER, key: {"type": "object"}}).encode()
    error = error_of(params.decode, body, True)
    message = f"`{key}` is not supported; use `structured_outputs.{key.removeprefix('guided_')}`"
    assert (error.status, error.param, error.message) == (400, key, message)
    for accepted in ({"type": "json_object"}, {"type": "text"}, None):  # checked later
        params.decode(json.dumps({"messages": USER, "response_format": accepted}).encode(),
                      True)


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
