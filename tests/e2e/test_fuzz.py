"""Property test: generated JSON bodies (well-formed, half-right and junk) thrown at every
route of both request modes never get a 5xx, streams always end with [DONE], and the
server keeps answering. The structured-output fields get random schemas, regexes and
grammars, most of which the engine cannot compile (a 400, never a 500 nor a hang)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.servers import MODEL, Server

pytestmark = pytest.mark.e2e

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
SMALL = st.integers(min_value=1, max_value=4)
ROLE = st.sampled_from(["user", "assistant", "system", "tool", "developer", "wizard"])
CONTENT = st.one_of(st.text(max_size=30), st.none(), JSON, st.lists(st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url"]), "text": st.text(max_size=10)}),
    max_size=2))
MESSAGE = st.one_of(st.fixed_dictionaries({"role": ROLE, "content": CONTENT}), JSON)
TOOL = st.one_of(st.just({"type": "function", "function": {"name": "f", "parameters": {}}}),
                 JSON)
# Structured outputs: random (often unsatisfiable or malformed) schemas, regexes, grammars.
SCHEMA = st.recursive(
    st.fixed_dictionaries({"type": st.sampled_from(
        ["string", "integer", "number", "boolean", "null", "object", "array", "bogus"])},
        optional={"minimum": st.integers(-5, 5), "maxLength": st.integers(-1, 4),
                  "pattern": st.text("ab()[]*+?|.", max_size=6),
                  "enum": st.lists(JSON, max_size=3)}),
    lambda children: st.fixed_dictionaries(
        {"type": st.just("object"),
         "properties": st.dictionaries(st.text(max_size=6), children, max_size=3)},
        optional={"required": st.lists(st.text(max_size=6), max_size=2),
                  "additionalProperties": st.booleans()})
    | st.fixed_dictionaries({"type": st.just("array"), "items": children},
                            optional={"minItems": st.integers(-1, 3),
                                      "maxItems": st.integers(0, 3)})
    | st.fixed_dictionaries({"anyOf": st.lists(children, max_size=3)}),
    max_leaves=8)
REGEX = st.text("ab01()[]{}*+?|.^$\\-,", max_size=12)
GRAMMAR = st.one_of(st.just('root ::= "yes" | "no"'), st.just("root ::= [a-z]+"),
                    st.text(max_size=20))
STRUCTURED = st.one_of(
    st.fixed_dictionaries({"json": st.one_of(SCHEMA, SCHEMA.map(json.dumps))}),
    st.fixed_dictionaries({"regex": REGEX}),
    st.fixed_dictionaries({"choice": st.lists(st.text(max_size=6), max_size=3)}),
    st.fixed_dictionaries({"grammar": GRAMMAR}),
    st.fixed_dictionaries({}, optional={
        "json": JSON, "regex": st.one_of(REGEX, JSON), "json_object": st.one_of(
            st.booleans(), JSON), "disable_any_whitespace": st.one_of(st.booleans(), JSON),
        "x": JSON}),
    JSON)
RESPONSE_FORMAT = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema", "x"])},
                          optional={"json_schema": st.one_of(st.fixed_dictionaries(
                              {"name": st.text(max_size=5), "schema": SCHEMA}), JSON)}),
    JSON)
CHOICE = st.one_of(st.sampled_from(["none", "auto", "required", "x"]),
                   st.just({"type": "function", "function": {"name": "f"}}), JSON)
COMMON = {
    "model": st.one_of(st.just(MODEL), JSON),
    "temperature": st.one_of(st.floats(-1, 3), JSON),
    "top_p": st.one_of(st.floats(0, 1.5), JSON),
    "top_k": st.one_of(st.integers(-3, 50), JSON),
    "n": st.one_of(st.integers(-1, 3), JSON),
    "seed": st.one_of(st.integers(-(2**64), 2**64), JSON),
    "stop": st.one_of(st.text(max_size=4), st.lists(st.text(max_size=4), max_size=3), JSON),
    "stream": st.booleans(),
    "stream_options": st.one_of(st.fixed_dictionaries({"include_usage": st.booleans()}), JSON),
    "ignore_eos": st.one_of(st.booleans(), JSON),
    "min_tokens": st.one_of(st.integers(-1, 5), JSON),
    "user": st.one_of(st.text(max_size=5), JSON),
    "response_format": RESPONSE_FORMAT,
    "structured_outputs": STRUCTURED,
    "skip_special_tokens": st.one_of(st.booleans(), JSON),
    "logit_bias": JSON,
    "frobnicate": JSON,
}
CHAT = {**COMMON,
        "messages": st.one_of(st.lists(MESSAGE, min_size=1, max_size=3), JSON),
        "logprobs": st.one_of(st.booleans(), JSON),
        "top_logprobs": st.one_of(st.integers(-1, 25), JSON),
        "tools": st.one_of(st.lists(TOOL, max_size=2), JSON),
        "tool_choice": CHOICE,
        "parallel_tool_calls": st.one_of(st.booleans(), JSON),
        "chat_template_kwargs": st.one_of(
            st.fixed_dictionaries({"enable_thinking": st.booleans()}), JSON),
        "add_generation_prompt": st.one_of(st.booleans(), JSON),
        "continue_final_message": st.one_of(st.booleans(), JSON)}
COMPLETION = {**COMMON,
              "prompt": st.one_of(st.text(max_size=30), st.lists(st.integers(-5, 200000),
                                                                  max_size=5), JSON),
              "logprobs": st.one_of(st.integers(-1, 25), JSON),
              "echo": st.one_of(st.booleans(), JSON),
              "suffix": JSON}
TOKENIZE = {"model": st.one_of(st.just(MODEL), JSON), "prompt": st.one_of(st.text(), JSON),
            "messages": st.one_of(st.lists(MESSAGE, max_size=2), JSON),
            "add_special_tokens": st.one_of(st.booleans(), JSON),
            "return_token_strs": st.one_of(st.booleans(), JSON),
            "tokens": st.one_of(st.lists(st.integers(-5, 200000), max_size=5), JSON)}


def bodies(fields: dict[str, Any], budget: bool) -> st.SearchStrategy[Any]:
    """Objects with any subset of ``fields`` (a small max_tokens when ``budget``), or
    anything at all."""
    optional = st.fixed_dictionaries({}, optional=fields)
    if budget:
        optional = st.tuples(optional, SMALL).map(lambda p: {**p[0], "max_tokens": p[1]})
    return st.one_of(optional, optional, optional, JSON)


ROUTES = [("/v1/chat/completions", bodies(CHAT, True)),
          ("/v1/completions", bodies(COMPLETION, True)),
          ("/tokenize", bodies(TOKENIZE, False)), ("/detokenize", bodies(TOKENIZE, False))]


def check(server: Server, path: str, body: Any) -> None:
    content = json.dumps(body).encode()
    with httpx.stream("POST", f"{server.url}{path}", content=content, timeout=60,
                      headers={"content-type": "application/json"}) as response:
        data = response.read()
    assert response.status_code < 500, (path, body, data[:500])
    if response.status_code == 200 and response.headers["content-type"].startswith(
            "text/event-stream"):
        assert data.endswith(b"data: [DONE]\n\n"), (body, data[-300:])


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_generated_bodies_never_get_a_5xx(server: Server, data: st.DataObject) -> None:
    for path, strategy in ROUTES:
        check(server, path, data.draw(strategy, label=path))
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_raw_bytes_never_get_a_5xx(server: Server, raw: bytes) -> None:
    for path in ("/v1/chat/completions", "/v1/completions", "/tokenize"):
        response = httpx.post(f"{server.url}{path}", content=raw, timeout=30,
                              headers={"content-type": "application/json"})
        assert response.status_code < 500, (path, raw, response.text)
