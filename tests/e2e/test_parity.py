"""The three frontends answer the same seeded requests with the same bodies: text (hence
token ids: the mock engine's tokens are a function of the seed and the prompt ids), finish
reasons, usage and every other field but the request id and the clock."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.e2e.features import CLOCK_TOOL, WEATHER_TOOL, user
from tests.e2e.servers import MODEL, MODES, Pool, sse_events

pytestmark = pytest.mark.e2e

CHAT = [{"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Grüße, 世界! 👋🏽 What's 2+2?"}]
REQUESTS: list[tuple[str, str, dict[str, Any]]] = [
    ("ids-prompt", "/v1/completions", {"prompt": [1000, 2000, 3000, 4000], "max_tokens": 20,
                                       "seed": 1}),
    ("text-prompt", "/v1/completions", {"prompt": "天気は 🌧️, then", "max_tokens": 24,
                                        "seed": 2}),
    ("chat", "/v1/chat/completions", {"messages": CHAT, "max_tokens": 16, "seed": 3}),
    ("chat-sampling", "/v1/chat/completions", {
        "messages": CHAT, "max_completion_tokens": 12, "seed": 4, "temperature": 0.5,
        "top_p": 0.9, "top_k": 50, "min_tokens": 3, "stop_token_ids": [7]}),
    ("ignore-eos", "/v1/completions", {"prompt": "x", "max_tokens": 30, "seed": 5,
                                       "ignore_eos": True}),
    ("special-tokens-kept", "/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 10,
                                                "seed": 6, "skip_special_tokens": False}),
    ("batched-n", "/v1/completions", {"prompt": ["a b", "c", "日本"], "n": 2,
                                      "max_tokens": 6, "seed": 7}),
    ("batched-ids", "/v1/completions", {"prompt": [[1000, 2000], [3000]], "max_tokens": 4,
                                        "seed": 13, "echo": True}),
    ("echo-logprobs", "/v1/completions", {"prompt": "Hello there, 世界", "max_tokens": 5,
                                          "echo": True, "logprobs": 2, "seed": 8}),
    ("echo-only", "/v1/completions", {"prompt": [1000, 2000, 3000], "max_tokens": 0,
                                      "echo": True, "logprobs": 1}),
    ("prompt-logprobs", "/v1/completions", {"prompt": "abc def", "max_tokens": 3,
                                            "prompt_logprobs": 2, "seed": 9}),
    ("chat-echo-prompt-logprobs", "/v1/chat/completions", {
        "messages": [*CHAT, {"role": "assistant", "content": "The answer is"}],
        "add_generation_prompt": False, "continue_final_message": True, "echo": True,
        "prompt_logprobs": 1, "max_tokens": 4, "seed": 10}),
    ("sampling-fields", "/v1/chat/completions", {
        "messages": CHAT, "logit_bias": {"5": 10, "70": -100}, "allowed_token_ids": [5, 6, 7],
        "bad_words": ["x", "hello world"], "max_tokens": 4, "seed": 11}),
    # Beam search: the mock's seeded steps make its logprobs (and so the beams) the same.
    ("beam-search", "/v1/completions", {"prompt": "Once upon", "max_tokens": 6, "n": 3,
                                        "use_beam_search": True, "seed": 15}),
    ("beam-search-batch", "/v1/completions", {
        "prompt": ["a b", "日本"], "max_tokens": 4, "n": 2, "use_beam_search": True,
        "length_penalty": -0.5, "echo": True, "seed": 16, "temperature": 0.7}),
    ("beam-search-chat", "/v1/chat/completions", {
        "messages": CHAT, "max_tokens": 5, "n": 4, "use_beam_search": True,
        "length_penalty": 2.5, "seed": 17, "ignore_eos": True}),
]
# The Responses and Messages APIs on the same pipeline (translated at the edge).
TOOL = {"type": "function", "name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}
REQUESTS += [
    ("responses", "/v1/responses", {
        "instructions": "Be brief.", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": CHAT[1]["content"]}]}],
        "max_output_tokens": 16, "seed": 3, "metadata": {"k": "v"}}),
    ("responses-tool-loop", "/v1/responses", {
        "input": [{"role": "user", "content": "Weather in Oslo?"},
                  {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                   "arguments": '{"city": "Oslo"}'},
                  {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}],
        "tools": [TOOL], "max_output_tokens": 8, "seed": 4, "temperature": 0.5}),
    ("responses-length", "/v1/responses", {"input": "天気は", "max_output_tokens": 3,
                                           "seed": 5, "top_p": 0.9}),
    ("messages", "/v1/messages", {
        "system": "Be brief.", "messages": [{"role": "user", "content": CHAT[1]["content"]}],
        "max_tokens": 16, "seed": 3}),
    ("messages-tool-loop", "/v1/messages", {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Oslo?"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1",
                                               "name": "get_weather",
                                               "input": {"city": "Oslo"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                          "content": "sunny"}]}],
        "tools": [{"name": "get_weather", "input_schema": TOOL["parameters"]}],
        "max_tokens": 8, "seed": 4, "top_k": 20}),
    ("messages-length", "/v1/messages", {"messages": [{"role": "user", "content": "x"}],
                                         "max_tokens": 3, "seed": 5}),
]
TYPED = [r for r in REQUESTS if r[1] in ("/v1/responses", "/v1/messages")]
STREAMED = [r for r in REQUESTS if r[0] in ("ids-prompt", "text-prompt", "chat", "batched-n",
                                            "echo-logprobs", "chat-echo-prompt-logprobs",
                                            "beam-search-chat")]


def normalised(body: Any) -> Any:
    """The body without the per-request ids and timestamps (the Responses API's items
    have ids of their own)."""
    if isinstance(body, dict):
        return {k: normalised(v) for k, v in body.items()
                if k not in ("id", "created", "created_at", "item_id")}
    if isinstance(body, list):
        return [normalised(v) for v in body]
    return body


def ask(pool: Pool, path: str, body: dict[str, Any]) -> dict[str, Any]:
    answers = {}
    for mode in MODES:
        response = httpx.post(f"{pool.get(mode).url}{path}", json={"model": MODEL, **body},
                              timeout=60)
        answers[mode] = (response.status_code, normalised(response.json()))
    return answers


@pytest.mark.parametrize(("path", "body"), [r[1:] for r in REQUESTS],
                         ids=[r[0] for r in REQUESTS])
def test_same_request_same_body(pool: Pool, path: str, body: dict[str, Any]) -> None:
    answers = ask(pool, path, body)
    first = answers[MODES[0]]
    assert first[0] == 200, first
    for mode in MODES[1:]:
        assert answers[mode] == first, f"{mode} differs from {MODES[0]}"
        # and in the same order: objects keyed by token (top_logprobs, prompt_logprobs)
        # list the actual token and the top-k in an order clients read
        assert json.dumps(answers[mode]) == json.dumps(first), f"{mode}: key order differs"


def stream(pool: Pool, mode: str, path: str, body: dict[str, Any]) -> list[Any]:
    body = {"model": MODEL, **body, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.stream("POST", f"{pool.get(mode).url}{path}", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        return [normalised(event) for event in sse_events(resp.iter_lines())]


@pytest.mark.parametrize(("path", "body"), [r[1:] for r in STREAMED],
                         ids=[r[0] for r in STREAMED])
def test_same_request_same_stream(pool: Pool, path: str, body: dict[str, Any]) -> None:
    """Each choice's text and finish, and the usage, agree with the whole answer (how text
    splits into chunks may differ)."""
    def summary(events: list[Any]) -> tuple[dict[int, tuple[str, Any]], Any]:
        texts: dict[int, str] = {}
        finishes: dict[int, Any] = {}
        for event in events:
            for piece in event["choices"]:
                index = piece["index"]
                texts[index] = texts.get(index, "") + (
                    piece.get("text") or (piece.get("delta") or {}).get("content") or "")
                finishes[index] = piece["finish_reason"] or finishes.get(index)
        return {i: (texts[i], finishes[i]) for i in texts}, events[-1]["usage"]

    results = {mode: summary(stream(pool, mode, path, body)) for mode in MODES}
    whole = ask(pool, path, body)[MODES[0]][1]
    expected = ({c["index"]: (c.get("text", (c.get("message") or {}).get("content")),
                              c["finish_reason"]) for c in whole["choices"]}, whole["usage"])
    assert results == dict.fromkeys(MODES, expected)


def test_continuous_usage_on_every_chunk(pool: Pool) -> None:
    body = {"model": MODEL, "prompt": ["one", "two words"], "n": 2, "max_tokens": 5,
            "seed": 12, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    streams = {}
    for mode in MODES:
        with httpx.stream("POST", f"{pool.get(mode).url}/v1/completions", json=body,
                          timeout=60) as resp:
            assert resp.status_code == 200
            streams[mode] = [normalised(e) for e in sse_events(resp.iter_lines())]
    for mode, events in streams.items():
        assert all(event.get("usage") for event in events), mode
        generated: dict[int, int] = {}
        for event in events[:-1]:
            (piece,) = event["choices"]
            usage = event["usage"]
            assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
            assert usage["completion_tokens"] >= generated.get(piece["index"], 0), mode
            generated[piece["index"]] = usage["completion_tokens"]
        assert events[-1]["choices"] == []
        assert events[-1]["usage"]["completion_tokens"] == sum(generated.values()) == 20, mode
    finals = {mode: events[-1]["usage"] for mode, events in streams.items()}
    assert len({repr(u) for u in finals.values()}) == 1, finals


def test_same_stop_string_cut(pool: Pool) -> None:
    base = {"prompt": "Once upon", "max_tokens": 40, "seed": 21}
    text = ask(pool, "/v1/completions", base)[MODES[0]][1]["choices"][0]["text"]
    answers = ask(pool, "/v1/completions", {**base, "stop": [text[10:13]]})
    assert len({repr(answer) for answer in answers.values()}) == 1, answers
    assert answers[MODES[0]][1]["choices"][0]["finish_reason"] == "stop"


def test_chat_opening_chunks_are_the_same(pool: Pool) -> None:
    """Role chunks, then echo chunks; with prompt_logprobs they wait for the engine's first
    output and the very first chunk carries them; continuous usage on each."""
    body = {"model": MODEL, "messages": [*CHAT, {"role": "assistant", "content": "Sure"}],
            "add_generation_prompt": False, "continue_final_message": True, "echo": True,
            "n": 2, "prompt_logprobs": 1, "max_tokens": 3, "seed": 14, "stream": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    openings = {}
    for mode in MODES:
        with httpx.stream("POST", f"{pool.get(mode).url}/v1/chat/completions", json=body,
                          timeout=60) as resp:
            assert resp.status_code == 200
            openings[mode] = [normalised(e) for e in sse_events(resp.iter_lines())][:4]
    first = openings[MODES[0]]
    assert [c["choices"][0]["delta"] for c in first] == [
        {"role": "assistant", "content": ""}, {"role": "assistant", "content": ""},
        {"content": "Sure"}, {"content": "Sure"}]
    assert first[0]["prompt_logprobs"][0] is None
    assert all("prompt_logprobs" not in c for c in first[1:])
    assert all(c["usage"]["completion_tokens"] == 0 for c in first)
    for mode in MODES[1:]:
        assert json.dumps(openings[mode]) == json.dumps(first), mode


FEATURE_REQUESTS: list[tuple[str, dict[str, Any]]] = [
    ("tool-call", {"messages": user("[weather] in Paris?"), "tools": [WEATHER_TOOL],
                   "max_tokens": 80}),
    ("two-calls", {"messages": user("[two calls]"), "tools": [WEATHER_TOOL, CLOCK_TOOL],
                   "max_tokens": 80}),
    ("forced-call", {"messages": user("weather?"), "tools": [WEATHER_TOOL],
                     "tool_choice": "required", "max_tokens": 80}),
    ("reasoning", {"messages": user("[think] what is 2+2?"), "max_tokens": 60,
                   "chat_template_kwargs": {"enable_thinking": True}}),
    ("unknown-tool", {"messages": user("x"), "tools": [WEATHER_TOOL], "tool_choice": {
        "type": "function", "function": {"name": "nope"}}}),
]


def joined(events: list[Any]) -> dict[str, Any]:
    """A chat stream put together: content, reasoning, calls (name, arguments), finish."""
    out: dict[str, Any] = {"content": "", "reasoning": "", "calls": [], "finish": None}
    for event in events:
        for piece in event["choices"]:
            delta = piece["delta"]
            out["content"] += delta.get("content") or ""
            out["reasoning"] += delta.get("reasoning_content") or ""
            for call in delta.get("tool_calls", ()):
                if call["index"] == len(out["calls"]):
                    out["calls"].append([call["function"]["name"], ""])
                out["calls"][call["index"]][1] += call["function"].get("arguments") or ""
            out["finish"] = piece["finish_reason"] or out["finish"]
    return out


@pytest.mark.parametrize("body", [r[1] for r in FEATURE_REQUESTS],
                         ids=[r[0] for r in FEATURE_REQUESTS])
def test_feature_servers_answer_alike(feature_pool: Pool, body: dict[str, Any]) -> None:
    """The feature servers (--mock-replies, --reasoning-parser, the auto tool-call parser)
    give the same bodies, and streams that put together the same, in the three modes: the
    request suites run them in the request modes only (servers.ROUTE_MODES)."""
    answers, streams = {}, {}
    for mode in MODES:
        url = f"{feature_pool.get(mode).url}/v1/chat/completions"
        response = httpx.post(url, json={"model": MODEL, **body}, timeout=60)
        answers[mode] = (response.status_code, normalised(response.json()))
        with httpx.stream("POST", url, json={"model": MODEL, **body, "stream": True},
                          timeout=60) as resp:
            streams[mode] = (resp.status_code, joined(sse_events(resp.iter_lines()))
                             if resp.status_code == 200 else normalised(json.loads(resp.read())))
    assert answers[MODES[0]][0] in (200, 400), answers
    for mode in MODES[1:]:
        assert answers[mode] == answers[MODES[0]], f"{mode} differs from {MODES[0]}"
        assert streams[mode] == streams[MODES[0]], f"{mode} streams differently"


def typed_stream(pool: Pool, mode: str, path: str, body: dict[str, Any]) -> list[Any]:
    """The (event type, payload) pairs of a typed stream, consecutive deltas of the same
    item merged (how text splits into events may differ between frontends), sequence
    numbers checked then dropped."""
    body = {"model": MODEL, **body, "stream": True}
    events: list[Any] = []
    with httpx.stream("POST", f"{pool.get(mode).url}{path}", json=body, timeout=60) as resp:
        assert resp.status_code == 200
        kind = None
        for line in resp.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                payload = normalised(json.loads(line.removeprefix("data: ")))
                assert payload["type"] == kind, (kind, payload)
                events.append(payload)
    if path == "/v1/responses":
        assert [e.pop("sequence_number") for e in events] == list(range(len(events)))
    merged: list[Any] = []
    for event in events:
        last = merged[-1] if merged else None
        if last is not None and event["type"] == last["type"] and "delta" in event:
            if isinstance(event["delta"], str):  # Responses: text and argument deltas
                last["delta"] += event["delta"]
                continue
            inner = event["delta"]  # Anthropic: text_delta, thinking_delta, input_json_delta
            key = next(k for k in ("text", "thinking", "partial_json") if k in inner)
            if last["index"] == event["index"] and last["delta"]["type"] == inner["type"]:
                last["delta"][key] += inner[key]
                continue
        merged.append(event)
    return merged


@pytest.mark.parametrize(("path", "body"), [r[1:] for r in TYPED],
                         ids=[r[0] for r in TYPED])
def test_same_request_same_typed_stream(pool: Pool, path: str, body: dict[str, Any]) -> None:
    """The Responses and Messages streams: the same events in the same order with the same
    payloads, and the final object equal to the non-streamed body."""
    streams = {mode: typed_stream(pool, mode, path, body) for mode in MODES}
    first = streams[MODES[0]]
    for mode in MODES[1:]:
        assert streams[mode] == first, f"{mode} differs from {MODES[0]}"
    whole = ask(pool, path, body)[MODES[0]][1]
    if path == "/v1/responses":
        final = first[-1]["response"]
        assert first[-1]["type"] in ("response.completed", "response.incomplete")
        assert final == whole
    else:
        assert [e["type"] for e in first[:2]] == ["message_start", "ping"]
        assert first[-1]["type"] == "message_stop"
        delta = first[-2]
        assert delta["delta"]["stop_reason"] == whole["stop_reason"]
        assert delta["usage"]["output_tokens"] == whole["usage"]["output_tokens"]
