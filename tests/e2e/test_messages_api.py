"""Anthropic's Messages API (`POST /v1/messages`, `/v1/messages/count_tokens`) on the Rust
and Python frontends, through the official `anthropic` SDK unchanged: text, thinking,
tool_use blocks, a two-turn tool loop whose prompt is the equivalent chat request's
(through `vrs render`'s render routes and usage.input_tokens), stop reasons, streaming
(every event, and the SDK's MessageStream), errors in Anthropic's shape, the API key in
`x-api-key`, and hypothesis-fuzzed bodies that never get a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.features import CALL_BEGIN, EXPECTED_SCRIPT, WEATHER_TOOL
from tests.e2e.servers import MODEL, Server
from tests.e2e.test_render import RenderServer

pytestmark = pytest.mark.e2e

WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "input_schema": WEATHER_TOOL["function"]["parameters"]}
CLOCK = {"name": "get_time", "input_schema": {"type": "object", "properties": {}}}
THINKING = {"type": "enabled", "budget_tokens": 1024}
KEY = "sk-messages-test"


@pytest.fixture
def feature(feature_pool: Any, route_mode: str) -> Server:
    return feature_pool.get(route_mode)


def client(server: Server, key: str = "x") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=60)


def ask(server: Server, text: str, **kwargs: Any) -> Any:
    kwargs.setdefault("max_tokens", 60)
    return client(server).messages.create(
        model=MODEL, messages=[{"role": "user", "content": text}], **kwargs)


def blocks(message: Any) -> list[dict[str, Any]]:
    return [block.model_dump(exclude_none=True) for block in message.content]


def test_text(feature: Server) -> None:
    message = ask(feature, "[script] go")
    assert message.id.startswith("msg_") and len(message.id) == 36
    assert (message.type, message.role, message.model) == ("message", "assistant", MODEL)
    assert blocks(message) == [{"type": "text", "text": EXPECTED_SCRIPT}]
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert message.usage.output_tokens > 0 and message.usage.input_tokens > 5


def test_thinking_block(feature: Server) -> None:
    message = ask(feature, "[think] what is 2+2?", thinking=THINKING, max_tokens=1100)
    assert blocks(message) == [
        {"type": "thinking", "thinking": "Two plus two is 4, 四.", "signature": ""},
        {"type": "text", "text": "The answer is 4."}]
    off = ask(feature, "[think] what is 2+2?", thinking={"type": "disabled"})
    assert [b["type"] for b in blocks(off)] == ["text"]


def test_tool_use_block(feature: Server) -> None:
    message = ask(feature, "[weather] in Paris?", tools=[WEATHER, CLOCK])
    assert message.stop_reason == "tool_use"
    text, call = message.content
    assert (text.type, text.text) == ("text", "Let me check.")
    assert (call.type, call.name, call.input) == ("tool_use", "get_weather",
                                                  {"city": "Paris", "days": [1, 2]})
    assert call.id
    forced = ask(feature, "anything", tools=[WEATHER], tool_choice={"type": "any"})
    assert [(b.type, b.input) for b in forced.content] == [("tool_use", {"city": "Rome"})]
    named = ask(feature, "anything", tools=[WEATHER],
                tool_choice={"type": "tool", "name": "get_weather"})
    assert [(b.name, b.input) for b in named.content] == [("get_weather", {"city": "Oslo"})]
    two = ask(feature, "[two calls]", tools=[WEATHER, CLOCK])
    assert [(b.name, b.input) for b in two.content] == [("get_weather", {"city": "Lima"}),
                                                        ("get_time", {})]


def test_stop_reasons(feature: Server) -> None:
    stopped = ask(feature, "[script] go", stop_sequences=["gamma"])
    assert (stopped.stop_reason, stopped.stop_sequence) == ("stop_sequence", "gamma")
    assert blocks(stopped) == [{"type": "text", "text": "alpha beta "}]
    cut = ask(feature, "[script] go", max_tokens=2)
    assert (cut.stop_reason, cut.stop_sequence, cut.usage.output_tokens) == (
        "max_tokens", None, 2)


def test_streamed_events(feature: Server) -> None:
    whole = ask(feature, "[weather] in Paris?", tools=[WEATHER])
    events = list(client(feature).messages.create(
        model=MODEL, max_tokens=60, messages=[{"role": "user", "content": "[weather] in Paris?"}],
        tools=[WEATHER], stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["message_start", "content_block_start"], kinds  # the SDK drops ping
    assert kinds[-2:] == ["message_delta", "message_stop"], kinds
    start = events[0].message
    assert (start.content, start.stop_reason, start.usage.output_tokens) == ([], None, 0)
    assert start.usage.input_tokens == whole.usage.input_tokens
    assert [e.content_block.type for e in events if e.type == "content_block_start"] == [
        "text", "tool_use"]
    assert [e.index for e in events if e.type == "content_block_stop"] == [0, 1]
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta"
                   and e.delta.type == "text_delta")
    arguments = "".join(e.delta.partial_json for e in events if e.type == "content_block_delta"
                        and e.delta.type == "input_json_delta")
    assert (text, json.loads(arguments)) == ("Let me check.", {"city": "Paris", "days": [1, 2]})
    assert (events[-2].delta.stop_reason, events[-2].usage.output_tokens) == (
        "tool_use", whole.usage.output_tokens)
    body = {"model": MODEL, "max_tokens": 60, "stream": True,
            "messages": [{"role": "user", "content": "[script] go"}]}
    with httpx.stream("POST", f"{feature.url}/v1/messages", json=body, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    frames = [frame.split("\n") for frame in raw.split("\n\n") if frame]
    assert [f[0] for f in frames[:2]] == ["event: message_start", "event: ping"]
    assert frames[1][1] == 'data: {"type":"ping"}'
    for head, data in frames:
        assert json.loads(data.removeprefix("data: "))["type"] == head.removeprefix("event: ")
    assert frames[-1] == ["event: message_stop", 'data: {"type":"message_stop"}']


def test_message_stream_helper(feature: Server) -> None:
    for text, kwargs in (("[think] 2+2?", {"thinking": THINKING, "max_tokens": 1100}),
                         ("[weather] in Paris?", {"tools": [WEATHER], "max_tokens": 60}),
                         ("[script] go", {"max_tokens": 60, "stop_sequences": ["delta"]})):
        whole = ask(feature, text, **kwargs)
        with client(feature).messages.stream(
                model=MODEL, messages=[{"role": "user", "content": text}], **kwargs) as stream:
            streamed_text = "".join(stream.text_stream)
            final = stream.get_final_message()
        assert streamed_text == "".join(b.text for b in whole.content if b.type == "text")
        expected = blocks(whole)
        got = blocks(final)
        for block in expected + got:
            block.pop("id", None)
        assert got == expected, text
        assert (final.stop_reason, final.stop_sequence, final.usage.output_tokens) == (
            whole.stop_reason, whole.stop_sequence, whole.usage.output_tokens)


@pytest.fixture
def render(route_mode: str, demo_model: Path, tmp_path: Path) -> Iterator[str]:
    """`vrs render` of the same frontend, with the feature servers' reasoning parser."""
    server = RenderServer("python" if route_mode == "python" else "rust", demo_model,
                          tmp_path / "render.log",
                          extra_args=("--max-model-len", "2048",
                                      "--reasoning-parser", "deepseek_r1"))
    yield server.url
    assert server.stop() == 0


def test_tool_loop_prompt_is_the_chat_prompt(feature: Server, render: str) -> None:
    first = ask(feature, "[weather] in Paris?", tools=[WEATHER])
    call = first.content[1]
    turns = [{"role": "user", "content": "[weather] in Paris?"},
             {"role": "assistant", "content": first.content},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                           "content": '{"temp_c": 21}'}]}]
    follow = client(feature).messages.create(model=MODEL, max_tokens=5, messages=turns,
                                             tools=[WEATHER], extra_body={"seed": 1})
    chat = {"model": MODEL, "max_tokens": 5, "tools": [WEATHER_TOOL], "seed": 1, "messages": [
        {"role": "user", "content": "[weather] in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": call.id, "type": "function", "function": {
                "name": "get_weather",
                "arguments": json.dumps(call.input, separators=(",", ":"))}}]},
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 21}'}]}
    wire = {"model": MODEL, "max_tokens": 5, "tools": [WEATHER], "seed": 1, "messages": [
        {**turn, "content": [b.model_dump(exclude_none=True) for b in turn["content"]]}
        if turn["role"] == "assistant" else turn for turn in turns]}
    as_chat = httpx.post(f"{render}/v1/chat/completions/render", json=chat, timeout=30)
    as_messages = httpx.post(f"{render}/v1/messages/render", json=wire, timeout=30)
    assert as_chat.status_code == as_messages.status_code == 200, as_messages.text
    ids = as_chat.json()["prompt_token_ids"]
    assert as_messages.json()["prompt_token_ids"] == ids
    assert as_messages.json()["prompt"] == as_chat.json()["prompt"]
    assert '{"temp_c": 21}' in as_chat.json()["prompt"]
    assert CALL_BEGIN in as_chat.json()["prompt"]
    assert follow.usage.input_tokens == len(ids)
    served = feature.client().chat.completions.create(**chat)
    assert served.usage.prompt_tokens == len(ids)
    counted = client(feature).messages.count_tokens(model=MODEL, messages=turns, tools=[WEATHER])
    assert counted.input_tokens == len(ids)
    refused = httpx.post(f"{render}/v1/messages/render", timeout=30,
                         json={**wire, "messages": wire["messages"][2:]})
    assert (refused.status_code, refused.json()) == (400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages[0].content[0].tool_use_id: "
        f"tool_result for unknown tool_use_id '{call.id}'"}})


def test_count_tokens(feature: Server) -> None:
    messages = [{"role": "user", "content": "[script] count me"}]
    counted = client(feature).messages.count_tokens(model=MODEL, messages=messages,
                                                    system="Be brief.")
    created = ask(feature, "[script] count me", system="Be brief.")
    assert counted.input_tokens == created.usage.input_tokens > 0
    bad = httpx.post(f"{feature.url}/v1/messages/count_tokens",
                     json={"model": MODEL, "messages": messages, "stream": True}, timeout=30)
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "stream is not supported by count_tokens"


BAD = [
    ({"messages": [{"role": "user", "content": "x"}]}, 400, "invalid_request_error",
     "max_tokens: Field required"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}]}]},
     400, "invalid_request_error",
     "messages[0].content[0].type: content block type 'image' is not supported"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}]},
     400, "invalid_request_error",
     "messages[0].content[0].tool_use_id: tool_result for unknown tool_use_id 'toolu_x'"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "extra": 1}, 400,
     "invalid_request_error", "extra: unknown field 'extra'"),
    ({"max_tokens": 5, "model": "nope", "messages": [{"role": "user", "content": "x"}]}, 404,
     "not_found_error", "The model `nope` does not exist."),
]


@pytest.mark.parametrize("body, status, kind, message", BAD, ids=[b[3][:30] for b in BAD])
def test_errors_in_anthropic_shape(feature: Server, body: dict[str, Any], status: int,
                                   kind: str, message: str) -> None:
    response = httpx.post(f"{feature.url}/v1/messages", json={"model": MODEL, **body},
                          timeout=30)
    assert response.status_code == status, response.text
    assert response.json() == {"type": "error", "error": {"type": kind, "message": message}}


def test_sdk_raises_on_errors(feature: Server) -> None:
    with pytest.raises(anthropic.BadRequestError) as info:
        client(feature).messages.create(model=MODEL, max_tokens=5, messages=[
            {"role": "user", "content": [{"type": "document", "source": {
                "type": "text", "media_type": "text/plain", "data": "d"}}]}])
    assert info.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError) as missing:
        client(feature).get("/v1/messages/nope", cast_to=object)
    assert missing.value.body["error"]["type"] == "not_found_error"


def test_api_key_and_timeout(route_mode: str, demo_model: Path, tmp_path: Path) -> None:
    """The key in x-api-key (or as a bearer token); the deadline as Anthropic's
    timeout_error: a 504 body, or an error event ending a stream that began."""
    server = Server(route_mode, demo_model, tmp_path / "server.log",
                    cli_args=("--api-key", KEY, "--mock-step-delay-ms", "5",
                              "--request-timeout", "1"))
    try:
        with pytest.raises(anthropic.AuthenticationError) as info:
            ask(server, "hi", max_tokens=2)
        assert info.value.status_code == 401
        assert info.value.body["error"]["type"] == "authentication_error"
        ok = client(server, KEY).messages.create(
            model=MODEL, max_tokens=2, messages=[{"role": "user", "content": "hi"}])
        assert ok.usage.output_tokens == 2
        bearer = httpx.post(f"{server.url}/v1/messages/count_tokens", timeout=30,
                            headers={"authorization": f"Bearer {KEY}"},
                            json={"model": MODEL, "messages": [{"role": "user", "content": "a"}]})
        assert bearer.status_code == 200 and bearer.json()["input_tokens"] > 0
        chat = httpx.post(f"{server.url}/v1/chat/completions", timeout=30,
                          headers={"x-api-key": KEY},
                          json={"model": MODEL, "max_tokens": 1, "messages": [
                              {"role": "user", "content": "a"}]})
        assert chat.status_code == 200
        long = {"model": MODEL, "max_tokens": 1500,
                "messages": [{"role": "user", "content": "a"}]}
        with pytest.raises(anthropic.APIStatusError) as late:
            client(server, KEY).messages.create(**long)
        assert late.value.status_code == 504
        assert late.value.body["error"]["type"] == "timeout_error"
        with client(server, KEY).messages.stream(**long) as stream, \
                pytest.raises(anthropic.APIStatusError) as cut:
            "".join(stream.text_stream)
        assert cut.value.body["error"]["type"] == "timeout_error", cut.value.body
        raw = httpx.post(f"{server.url}/v1/messages", headers={"x-api-key": KEY}, timeout=30,
                         json={**long, "stream": True}).text
        assert raw.startswith("event: message_start\n")
        assert raw.endswith('"message":"the request did not finish within the server\'s '
                            'request timeout of 1 s"}}\n\n'), raw[-300:]
        assert raw.rsplit("\n\n", 2)[-2].startswith('event: error\ndata: {"type":"error",'
                                                     '"error":{"type":"timeout_error",')
    finally:
        assert server.stop() == 0, server.log()


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)
BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.sampled_from(
        ["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking", "x"])},
        optional={"text": st.one_of(st.text(max_size=10), JSON), "id": st.just("t1"),
                  "tool_use_id": st.sampled_from(["t1", "t2"]), "name": st.just("f"),
                  "input": st.one_of(st.just({}), JSON), "content": JSON,
                  "thinking": st.text(max_size=5), "is_error": JSON}),
    JSON)
MESSAGE = st.one_of(st.fixed_dictionaries({
    "role": st.sampled_from(["user", "assistant", "system", "x"]),
    "content": st.one_of(st.text(max_size=20), st.lists(BLOCK, max_size=3), JSON)}), JSON)
FIELDS = {
    "model": st.one_of(st.just(MODEL), JSON),
    "messages": st.one_of(st.lists(MESSAGE, min_size=1, max_size=3), JSON),
    "max_tokens": st.one_of(st.integers(-1, 6), JSON),
    "system": st.one_of(st.text(max_size=10), st.lists(BLOCK, max_size=2), JSON),
    "tools": st.one_of(st.just([WEATHER]), st.lists(JSON, max_size=2), JSON),
    "tool_choice": st.one_of(st.fixed_dictionaries({"type": st.sampled_from(
        ["auto", "any", "tool", "none", "x"])}, optional={"name": st.just("get_weather"),
                                                          "disable_parallel_tool_use": JSON}),
        JSON),
    "stop_sequences": st.one_of(st.lists(st.text(max_size=3), max_size=2), JSON),
    "temperature": st.one_of(st.floats(-1, 3), JSON), "top_p": JSON, "top_k": JSON,
    "stream": st.booleans(), "metadata": st.one_of(st.just({"user_id": "u"}), JSON),
    "thinking": st.one_of(st.just(THINKING), st.just({"type": "disabled"}), JSON),
    "seed": JSON, "frobnicate": JSON,
}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_bodies_never_get_a_5xx(feature: Server, data: st.DataObject) -> None:
    body = data.draw(st.one_of(st.fixed_dictionaries({}, optional=FIELDS), JSON))
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        with httpx.stream("POST", f"{feature.url}{path}", content=json.dumps(body).encode(),
                          headers={"content-type": "application/json"}, timeout=60) as response:
            raw = response.read()
        assert response.status_code < 500, (path, body, raw[:500])
        if response.status_code >= 400:
            assert json.loads(raw)["type"] == "error", raw
        elif response.headers["content-type"].startswith("text/event-stream"):
            assert raw.endswith(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), (
                body, raw[-300:])
    assert httpx.get(f"{feature.url}/health", timeout=10).status_code == 200


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.binary(max_size=64) | st.text(max_size=64).map(str.encode))
def test_raw_bytes_never_get_a_5xx(feature: Server, raw: bytes) -> None:
    for path in ("/v1/messages", "/v1/messages/count_tokens"):
        response = httpx.post(f"{feature.url}{path}", content=raw, timeout=30,
                              headers={"content-type": "application/json"})
        assert response.status_code < 500, (path, raw, response.text)
        assert response.json()["type"] == "error"
