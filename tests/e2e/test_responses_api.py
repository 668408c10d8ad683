"""``POST /v1/responses`` (the store off: the default) on the Rust and Python frontends,
through the official `openai` SDK unchanged: text, a reasoning item, a scripted tool call
as a function_call item, the two-turn tool loop (its prompt the equivalent chat request's,
through the render routes of `vrs render` and ``usage.input_tokens``), ``max_output_tokens`` ->
``incomplete``; created whole, streamed (every event, typed by the SDK) and through
``responses.stream`` + ``get_final_response``; bad input -> a 4xx OpenAI error naming
the field; the stored-response routes -> vLLM's 404 (with the store:
test_responses_store.py); generated bodies never get a 5xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.features import EXPECTED_SCRIPT, WEATHER_TOOL
from tests.e2e.servers import MODEL, Server
from tests.e2e.test_fuzz import JSON
from tests.e2e.test_render import RenderServer

pytestmark = pytest.mark.e2e

WEATHER = {"type": "function", **{k: v for k, v in WEATHER_TOOL["function"].items()}}
CLOCK = {"type": "function", "name": "get_time", "parameters": {}}
REASONING, ANSWER = "Two plus two is 4, 四.", "The answer is 4."
PARIS = {"city": "Paris", "days": [1, 2]}


@pytest.fixture(scope="module")
def renderers(demo_model: Path, tmp_path_factory: pytest.TempPathFactory,
              ) -> Iterator[dict[str, RenderServer]]:
    started: dict[str, RenderServer] = {}
    tmp = tmp_path_factory.mktemp("responses-render")
    yield started
    for name, server in started.items():
        assert server.stop() == 0, (tmp / f"{name}.log").read_text()


@pytest.fixture
def renderer(route_mode: str, renderers: dict[str, RenderServer], demo_model: Path,
             tmp_path_factory: pytest.TempPathFactory) -> RenderServer:
    """`vrs render` of the request mode's frontend (started on first use)."""
    frontend = "python" if route_mode == "python" else "rust"
    if frontend not in renderers:
        log = tmp_path_factory.mktemp("render") / f"{frontend}.log"
        renderers[frontend] = RenderServer(frontend, demo_model, log)
    return renderers[frontend]


def create(server: Server, **kwargs: Any) -> Any:
    kwargs.setdefault("max_output_tokens", 60)
    return server.client().responses.create(model=MODEL, **kwargs)


def streamed(server: Server, **kwargs: Any) -> tuple[list[Any], Any]:
    """(every event, the final response) of a streamed create; checks the sequence numbers
    and that each item's deltas add up to its done text."""
    events = list(create(server, stream=True, **kwargs))
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert [e.type for e in events[:2]] == ["response.created", "response.in_progress"]
    assert events[0].response.status == "in_progress" and events[0].response.output == []
    texts: dict[str, str] = {}
    for event in events:
        if event.type.endswith(".delta"):
            texts[event.item_id] = texts.get(event.item_id, "") + event.delta
        elif event.type in ("response.output_text.done", "response.reasoning_text.done"):
            assert texts.pop(event.item_id) == event.text
        elif event.type == "response.function_call_arguments.done":
            assert texts.pop(event.item_id, "") == event.arguments
    assert not texts
    assert events[-1].type in ("response.completed", "response.incomplete")
    return events, events[-1].response


def summary(response: Any) -> list[tuple[str, Any]]:
    """The output items without their ids: (type, text / reasoning / (name, arguments))."""
    out: list[tuple[str, Any]] = []
    for item in response.output:
        assert item.status == "completed"
        if item.type == "message":
            assert [part.type for part in item.content] == ["output_text"]
            out.append(("message", item.content[0].text))
        elif item.type == "reasoning":
            assert item.summary == []
            out.append(("reasoning", "".join(part.text for part in item.content)))
        else:
            assert item.type == "function_call" and item.id.startswith("fc_")
            out.append(("function_call", (item.name, json.loads(item.arguments))))
    return out


def test_text(feature_server: Server) -> None:
    response = create(feature_server, input="[script] go", instructions="Be brief.",
                      metadata={"k": "v"}, temperature=0.5)
    assert response.id.startswith("resp_") and response.object == "response"
    assert (response.status, response.model, response.output_text) == (
        "completed", MODEL, EXPECTED_SCRIPT)
    assert summary(response) == [("message", EXPECTED_SCRIPT)]
    assert (response.instructions, response.metadata, response.temperature) == (
        "Be brief.", {"k": "v"}, 0.5)
    assert response.store is False and response.previous_response_id is None
    usage = response.usage
    assert usage.output_tokens > 0 and usage.input_tokens > 0
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    events, final = streamed(feature_server, input="[script] go", instructions="Be brief.")
    assert final.output_text == EXPECTED_SCRIPT and final.usage.input_tokens == (
        usage.input_tokens)
    kinds = [e.type for e in events]
    assert kinds[2:4] == ["response.output_item.added", "response.content_part.added"]
    assert kinds[-4:] == ["response.output_text.done", "response.content_part.done",
                          "response.output_item.done", "response.completed"]
    with feature_server.client().responses.stream(model=MODEL, input="[script] go",
                                                  max_output_tokens=60) as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    assert deltas == final.output_text == EXPECTED_SCRIPT


def test_reasoning_item(feature_server: Server, tokenizer: Any) -> None:
    expected = [("reasoning", REASONING), ("message", ANSWER)]
    whole = create(feature_server, input="[reason] 2+2?")
    assert summary(whole) == expected
    # The reasoning tokens: <think>, the reasoning, </think>.
    thinking = len(tokenizer.encode(f"<think>{REASONING}</think>", add_special_tokens=False))
    assert whole.usage.output_tokens_details.reasoning_tokens == thinking
    events, final = streamed(feature_server, input="[reason] 2+2?")
    assert summary(final) == expected
    assert final.usage.output_tokens_details.reasoning_tokens == thinking
    assert "response.reasoning_text.delta" in {e.type for e in events}
    with feature_server.client().responses.stream(model=MODEL, input="[reason] 2+2?",
                                                  max_output_tokens=60) as stream:
        for _ in stream:
            pass
        assert summary(stream.get_final_response()) == expected


def test_function_call_item(feature_server: Server) -> None:
    expected = [("message", "Let me check."), ("function_call", ("get_weather", PARIS))]
    response = create(feature_server, input="[weather] in Paris?", tools=[WEATHER, CLOCK])
    assert summary(response) == expected and response.status == "completed"
    assert response.output[1].call_id.startswith("call_")
    assert response.tools[0].name == "get_weather" and response.tool_choice == "auto"
    events, final = streamed(feature_server, input="[weather] in Paris?", tools=[WEATHER])
    assert summary(final) == expected
    added = [e for e in events if e.type == "response.output_item.added"]
    assert [(e.output_index, e.item.type) for e in added] == [(0, "message"),
                                                             (1, "function_call")]
    assert added[1].item.arguments == "" and added[1].item.status == "in_progress"
    with feature_server.client().responses.stream(model=MODEL, input="[two calls]",
                                                  tools=[WEATHER, CLOCK],
                                                  max_output_tokens=80) as stream:
        for _ in stream:
            pass
        assert summary(stream.get_final_response()) == [
            ("function_call", ("get_weather", {"city": "Lima"})),
            ("function_call", ("get_time", {}))]


def test_two_turn_tool_loop_renders_the_chat_prompt(feature_server: Server,
                                                    renderer: RenderServer) -> None:
    first = create(feature_server, input="[weather] in Paris?", tools=[WEATHER])
    call = first.output[1]
    items = [{"role": "user", "content": "[weather] in Paris?"},
             *[item.model_dump(exclude_none=True) for item in first.output],
             {"type": "function_call_output", "call_id": call.call_id,
              "output": '{"temp_c": 21}'}]
    second = create(feature_server, input=items, tools=[WEATHER], max_output_tokens=5)
    assert second.status in ("completed", "incomplete")
    chat = {"model": MODEL, "tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "[weather] in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": call.call_id, "type": "function",
             "function": {"name": "get_weather", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": '{"temp_c": 21}'}]}
    by_chat = renderer.client.post("/v1/chat/completions/render", json=chat)
    by_responses = renderer.client.post("/v1/responses/render", json={
        "model": MODEL, "input": items, "tools": [WEATHER]})
    assert by_chat.status_code == by_responses.status_code == 200, by_responses.text
    ids = by_chat.json()["prompt_token_ids"]
    assert by_responses.json()["prompt_token_ids"] == ids
    assert by_responses.json()["prompt"] == by_chat.json()["prompt"]
    assert '{"temp_c": 21}' in by_chat.json()["prompt"]
    assert second.usage.input_tokens == len(ids)
    chat_usage = feature_server.client().chat.completions.create(
        **chat, max_tokens=5).usage.prompt_tokens
    assert chat_usage == len(ids)


def test_max_output_tokens_is_incomplete(feature_server: Server) -> None:
    response = create(feature_server, input="[script] go", max_output_tokens=2)
    assert response.status == "incomplete" and response.max_output_tokens == 2
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.usage.output_tokens == 2
    events, final = streamed(feature_server, input="[script] go", max_output_tokens=2)
    assert events[-1].type == "response.incomplete" and final.status == "incomplete"
    assert final.output_text == response.output_text


BAD = [
    ({"background": True, "store": False}, "background", "only be used when `store` is true"),
    ({"input": [{"type": "function_call_output", "call_id": "call_x", "output": "1"}]},
     "input[0].call_id", "unknown call_id 'call_x'"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type", "built-in tool 'web_search'"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type", "'input_image' is not supported"),
    ({"frobnicate": 1}, "frobnicate", "unknown field 'frobnicate'"),
    ({"reasoning": {"effort": "huge"}}, "reasoning.effort", "`reasoning_effort` must be one of"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice",
     "not in `tools`"),
    ({"max_output_tokens": 5000}, "max_output_tokens", "maximum context length"),
    # Refused by the engine's grammar compiler (after the translation), named all the same.
    ({"text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "objectx"}}}},
     "text.format", "not valid JSON Schema at `#/type`"),
]


@pytest.mark.parametrize(("extra", "param", "words"), BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_a_400_naming_the_field(feature_server: Server, extra: dict[str, Any],
                                             param: str, words: str) -> None:
    body = {"input": "hi", **extra}
    typed = {k: v for k, v in body.items() if k != "frobnicate"}  # the SDK's own arguments
    with pytest.raises(openai.BadRequestError) as info:
        feature_server.client().responses.create(model=MODEL, **typed, extra_body={
            k: v for k, v in body.items() if k not in typed})
    error = info.value.body
    assert (error["param"], error["type"]) == (param, "BadRequestError"), error
    assert words in error["message"], error
    raw = httpx.post(f"{feature_server.url}/v1/responses", timeout=30,
                     json={"model": MODEL, "stream": True, **body})
    assert raw.status_code == 400 and raw.json()["error"]["param"] == param


def test_unknown_model_and_stored_routes(feature_server: Server) -> None:
    with pytest.raises(openai.NotFoundError):
        feature_server.client().responses.create(model="nope", input="hi")
    client = feature_server.client()
    for call in (lambda: client.responses.retrieve("resp_1"),
                 lambda: client.responses.delete("resp_1"),
                 lambda: client.responses.cancel("resp_1"),
                 lambda: client.responses.input_items.list("resp_1")):
        with pytest.raises(openai.NotFoundError) as info:
            call()
        assert info.value.body["message"] == "Response with id 'resp_1' not found."
    wrong = httpx.put(f"{feature_server.url}/v1/responses/resp_1", timeout=30)
    assert wrong.status_code == 405


def test_deadline_mid_stream_is_an_error_event(route_mode: str, demo_model: Path,
                                               tmp_path: Path) -> None:
    """``--request-timeout`` expiring after the stream began: an ``error`` event (the
    OpenAI error type as its code), then the stream ends; not streamed, a 504."""
    server = Server(route_mode, demo_model, tmp_path / "server.log", cli_args=(
        "--request-timeout", "1", "--mock-step-delay-ms", "20"))
    try:
        events = list(server.client().responses.create(
            model=MODEL, input="hi", max_output_tokens=1000, stream=True))
        assert [e.sequence_number for e in events] == list(range(len(events)))
        last = events[-1]
        assert (last.type, last.code, last.param) == ("error", "TimeoutError", None)
        assert "request timeout" in last.message
        assert "response.output_text.delta" in {e.type for e in events[:-1]}
        assert not {"response.completed", "response.incomplete"} & {e.type for e in events}
        with pytest.raises(openai.APIStatusError) as info:
            server.client().responses.create(model=MODEL, input="hi", max_output_tokens=1000)
        assert info.value.status_code == 504
    finally:
        assert server.stop() == 0, server.log()


ITEM = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "developer", "x"]),
                           "content": st.one_of(st.text(max_size=20), JSON)}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": st.sampled_from(
        ["c1", "c2"]), "name": st.sampled_from(["get_weather", "f"]),
        "arguments": st.one_of(st.just("{}"), JSON)}),
    st.fixed_dictionaries({"type": st.just("function_call_output"),
                           "call_id": st.sampled_from(["c1", "c2"]), "output": JSON}),
    st.fixed_dictionaries({"type": st.sampled_from(["reasoning", "item_reference"]),
                           "content": JSON}),
    JSON)
FIELDS = {
    "model": st.one_of(st.just(MODEL), JSON),
    "input": st.one_of(st.text(max_size=20), st.lists(ITEM, max_size=4), JSON),
    "instructions": st.one_of(st.text(max_size=10), JSON),
    "tools": st.one_of(st.just([WEATHER]), st.lists(JSON, max_size=2), JSON),
    "tool_choice": st.one_of(st.sampled_from(["auto", "none", "required"]),
                             st.just({"type": "function", "name": "get_weather"}), JSON),
    "max_output_tokens": st.one_of(st.integers(-1, 6), JSON),
    "temperature": st.one_of(st.floats(-1, 3), JSON),
    "text": st.one_of(st.fixed_dictionaries({"format": st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "json_object", "json_schema", "x"])},
        optional={"name": st.text(max_size=4), "schema": JSON})}), JSON),
    "reasoning": JSON, "store": JSON, "stream": st.booleans(), "metadata": JSON,
    "parallel_tool_calls": JSON, "previous_response_id": JSON, "truncation": JSON,
    "include": JSON, "stream_options": JSON, "frobnicate": JSON,
}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=st.one_of(st.fixed_dictionaries({}, optional=FIELDS),
                      st.fixed_dictionaries({"input": st.text(max_size=10)}, optional={
                          k: v for k, v in FIELDS.items() if k != "input"}),
                      JSON))
def test_generated_bodies_never_get_a_5xx(feature_server: Server, body: Any) -> None:
    if isinstance(body, dict) and "max_output_tokens" not in body:
        body["max_output_tokens"] = 4  # not the whole context of random tokens
    with httpx.stream("POST", f"{feature_server.url}/v1/responses", timeout=60,
                      content=json.dumps(body).encode(),
                      headers={"content-type": "application/json"}) as response:
        data = response.read()
    assert response.status_code < 500, (body, data[:500])
    if response.status_code == 200 and response.headers["content-type"].startswith(
            "text/event-stream"):
        last = data.rstrip(b"\n").rsplit(b"\n\n", 1)[-1]
        assert last.startswith((b"event: response.completed", b"event: response.incomplete",
                                b"event: error")), (body, data[-300:])
