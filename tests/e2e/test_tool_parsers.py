"""Every tool-call parser through the real frontends (``rust-serve`` and the Python
frontend), stream and not: a server per parser per mode (``--tool-call-parser NAME``) whose
mock engine replies with that family's outputs, taken from the shared case table
(tests/parser_cases/tools.jsonl): one call, two parallel calls, text around a call, the
family's markers inside JSON string arguments, CJK and emoji, a call truncated by
``max_tokens``, and a malformed call. The mock streams a reply token by token, so markers
arrive split across pieces; and the text-around reply once per offset inside each of its
markers, with a piece boundary there (the mock reply's ``cuts``).

For each: the non-streamed answer is the case's content, calls and finish_reason; the
streamed deltas have OpenAI's shape (a call's first delta has index, id, type and
function.name; later ones only index and an arguments piece; absent fields are omitted,
never null; a long call's arguments come in several pieces); the streamed content and the
concatenated argument pieces equal the non-streamed answer exactly; and the openai SDK's
``chat.completions.stream`` accumulator rebuilds the same ``tool_calls``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.features import user
from tests.e2e.servers import MODEL, Server, sse_events

pytestmark = pytest.mark.e2e

TABLE = Path(__file__).resolve().parents[1] / "parser_cases" / "tools.jsonl"
CASES = {c["name"]: c for c in map(json.loads, TABLE.read_text(encoding="utf-8").splitlines())}
PARSERS = ("demo", "hermes", "llama3_json", "mistral", "deepseek_v3", "granite", "qwen3_coder",
           "pythonic")
# Rust serve runs every format (the Rust parsers); rust-frontend runs the same Rust code.
# The Python frontend runs one format of each scanner kind (tagged JSON, special-token
# sections, XML parameters, Python calls): every Python format meets the whole case table
# in tests/server/test_tool_cases.py, so here only the wiring through the frontend is new.
PYTHON_PARSERS = ("hermes", "deepseek_v3", "qwen3_coder", "pythonic")
SERVERS = [(p, "rust-serve") for p in PARSERS] + [(p, "python") for p in PYTHON_PARSERS]
SCENARIOS = ("one_call", "two_calls", "text_around", "markers_in_arguments", "cjk_emoji",
             "malformed", "truncated")


def case_of(parser: str, scenario: str) -> dict[str, Any]:
    """The table case a scenario plays (``truncated`` replays the whole one call)."""
    if scenario == "truncated":
        scenario = "one_call"
    if scenario == "text_around" and parser in ("llama3_json", "pythonic"):
        scenario = "text_after"  # these formats parse only an output that starts with a call
    return CASES[f"{parser}_{scenario}"]


def trigger(scenario: str) -> str:
    return f"[tool-parser-case {scenario}]"


# Every marker string of the eight formats (server/parsers/tools/formats.py).
MARKERS = ("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁begin｜>",
           "<｜tool▁calls▁end｜>", "<｜tool▁sep｜>", "<tool_call>", "</tool_call>",
           "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "<|tool_call|>", "<function=",
           "<parameter=", "</parameter>", "</function>", "<|python_start|>", "<|python_end|>")


def marker_cuts(text: str) -> list[int]:
    """Every offset strictly inside an occurrence of a marker in ``text``."""
    cuts: set[int] = set()
    for marker in MARKERS:
        start = text.find(marker)
        while start != -1:
            cuts.update(range(start + 1, start + len(marker)))
            start = text.find(marker, start + 1)
    return sorted(cuts)


def split_trigger(cut: int) -> str:
    return f"[tool-parser-split {cut}]"


# Format-independent forcing (every parser but demo / hermes): the engine's grammar takes
# the scripted reply token by token while it fits the structural tag.
FORCED_REQUIRED = ('[{"name": "get_weather", "parameters": {"city": "Paris", "days": 3}}, '
                   '{"name": "get_time", "parameters": {"zone": "UTC"}}]')
FORCED_NAMED = '{"city": "東京 🌸", "days": 2}'
FORCED = {"forced-required": FORCED_REQUIRED, "forced-named": FORCED_NAMED}


@pytest.fixture(scope="module", params=SERVERS, ids=[f"{p}-{m}" for p, m in SERVERS])
def parser_server(request: pytest.FixtureRequest, demo_model: Path,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Server]]:
    parser, mode = request.param
    directory = tmp_path_factory.mktemp(f"tool-{parser}-{mode}")
    replies = directory / "replies.json"
    scripts = [{"when": trigger(s), "reply": case_of(parser, s)["text"]} for s in SCENARIOS]
    scripts += [{"when": trigger(s), "reply": reply} for s, reply in FORCED.items()]
    around = case_of(parser, "text_around")["text"]
    scripts += [{"when": split_trigger(k), "reply": around, "cuts": [k]}
                for k in marker_cuts(around)]
    replies.write_text(json.dumps(scripts), encoding="utf-8")
    server = Server(mode, demo_model, directory / "server.log",
                    cli_args=("--mock-step-delay-ms", "1", "--mock-replies", str(replies),
                              "--tool-call-parser", parser))
    yield parser, server
    assert server.stop() == 0, server.log()
    server.assert_all_gone()


def body(case: dict[str, Any], scenario: str, max_tokens: int) -> dict[str, Any]:
    return {"model": MODEL, "messages": user(trigger(scenario)), "tools": case["tools"],
            "parallel_tool_calls": case["parallel"], "max_tokens": max_tokens}


def truncation(tokenizer: Any, text: str) -> int:
    """Tokens of ``text`` up to two characters into ``Paris`` (inside the call)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    cut = text.index("Paris") + 2
    return next(k for k in range(1, len(ids)) if len(tokenizer.decode(ids[:k])) >= cut)


def streamed(server: Server, request: dict[str, Any]) -> tuple[str, list[dict[str, Any]], str,
                                                                 list[int]]:
    """(content, calls rebuilt from the raw SSE deltas, finish_reason, argument pieces per
    call), checking each tool-call delta's shape on the wire."""
    content, calls, finish, pieces = "", [], None, []
    with httpx.stream("POST", f"{server.url}/v1/chat/completions",
                      json={**request, "stream": True}, timeout=60) as response:
        assert response.status_code == 200, response.read()
        events = sse_events(response.iter_lines())
    for event in events:
        choice = event["choices"][0]
        delta = choice["delta"]
        content += delta.get("content") or ""
        for call in delta.get("tool_calls", ()):
            if call["index"] == len(calls):  # a call's first delta
                assert set(call) == {"index", "id", "type", "function"}, call
                assert call["type"] == "function" and isinstance(call["id"], str), call
                assert set(call["function"]) == {"name", "arguments"}, call
                calls.append({"id": call["id"], "name": call["function"]["name"],
                              "arguments": ""})
                pieces.append(0)
            else:
                assert call["index"] == len(calls) - 1, call
                assert set(call) == {"index", "function"}, call
                assert set(call["function"]) == {"arguments"}, call
            calls[-1]["arguments"] += call["function"]["arguments"]
            pieces[-1] += 1
        finish = choice["finish_reason"] or finish
    return content, calls, finish, pieces


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_parser_through_the_frontend(parser_server: tuple[str, Server], scenario: str,
                                     tokenizer: Any) -> None:
    parser, server = parser_server
    case = case_of(parser, scenario)
    max_tokens = truncation(tokenizer, case["text"]) if scenario == "truncated" else 400
    request = body(case, scenario, max_tokens)
    response = httpx.post(f"{server.url}/v1/chat/completions", json=request, timeout=60)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    message = choice["message"]
    calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
             for c in message.get("tool_calls") or ()]
    if scenario == "truncated":
        full = case["calls"][0]["arguments"]
        assert choice["finish_reason"] == "length"
        assert [c["name"] for c in calls] == ["get_weather"], message
        assert full.startswith(calls[0]["arguments"]) and calls[0]["arguments"] != full
    else:
        assert (message["content"] or "", calls, choice["finish_reason"]) == (
            case["content"], case["calls"], case["finish"])

    content, streamed_calls, finish, pieces = streamed(server, request)
    assert content == (message["content"] or "")
    assert [{"name": c["name"], "arguments": c["arguments"]} for c in streamed_calls] == calls
    assert finish == choice["finish_reason"]
    if scenario == "one_call":
        assert pieces[0] > 1, "a long call's arguments stream in pieces"

    client = server.client()
    with client.chat.completions.stream(
            model=MODEL, messages=request["messages"], tools=request["tools"],
            parallel_tool_calls=request["parallel_tool_calls"],
            max_tokens=request["max_tokens"]) as stream:
        for _ in stream:
            pass
        # get_final_completion() refuses a "length" answer; the snapshot is the same
        # accumulation without the parse step.
        final = stream.current_completion_snapshot
    rebuilt = [{"name": c.function.name, "arguments": c.function.arguments}
               for c in final.choices[0].message.tool_calls or ()]
    assert rebuilt == calls
    assert (final.choices[0].message.content or "") == (message["content"] or "")
    assert final.choices[0].finish_reason == choice["finish_reason"]


def test_forcing_without_native_markers(parser_server: tuple[str, Server]) -> None:
    """``required`` / a named function for parsers that do not force natively: JSON, no
    prefill, read back by the forced-JSON parser, stream and not alike."""
    parser, server = parser_server
    if parser in ("demo", "hermes"):
        pytest.skip("demo and hermes force natively (tests/e2e/test_tools.py)")
    tools = CASES[f"{parser}_one_call"]["tools"]
    named = {"type": "function", "function": {"name": "get_weather"}}
    for scenario, choice, expected in (
        ("forced-required", "required",
         [{"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'},
          {"name": "get_time", "arguments": '{"zone": "UTC"}'}]),
        ("forced-named", named, [{"name": "get_weather", "arguments": FORCED_NAMED}]),
    ):
        request = {"model": MODEL, "messages": user(trigger(scenario)), "tools": tools,
                   "tool_choice": choice, "max_tokens": 200}
        response = httpx.post(f"{server.url}/v1/chat/completions", json=request, timeout=60)
        assert response.status_code == 200, response.text
        choice_out = response.json()["choices"][0]
        calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in choice_out["message"].get("tool_calls") or ()]
        assert (calls, choice_out["message"]["content"], choice_out["finish_reason"]) == (
            expected, None, "tool_calls"), scenario
        content, streamed_calls, finish, _ = streamed(server, request)
        assert (content, finish) == ("", "tool_calls")
        assert [{"name": c["name"], "arguments": c["arguments"]} for c in streamed_calls] == calls


def test_markers_split_at_every_boundary(parser_server: tuple[str, Server]) -> None:
    """The text-around reply streamed with a piece boundary at every offset inside each of
    its markers (the mock encodes the reply in two parts there): each streamed answer is
    the case's content and calls, and no content piece carries a held-back fragment."""
    parser, server = parser_server
    case = case_of(parser, "text_around")
    cuts = marker_cuts(case["text"])
    assert len(cuts) >= 10, cuts
    for cut in cuts:
        request = {"model": MODEL, "messages": user(split_trigger(cut)), "tools": case["tools"],
                   "parallel_tool_calls": case["parallel"], "max_tokens": 400, "stream": True}
        pieces: list[str] = []
        calls: list[dict[str, str]] = []
        with httpx.stream("POST", f"{server.url}/v1/chat/completions", json=request,
                          timeout=60) as response:
            assert response.status_code == 200, response.read()
            events = sse_events(response.iter_lines())
        for event in events:
            delta = event["choices"][0]["delta"]
            if delta.get("content"):
                pieces.append(delta["content"])
            for call in delta.get("tool_calls", ()):
                if call["index"] == len(calls):
                    calls.append({"name": call["function"]["name"], "arguments": ""})
                calls[call["index"]]["arguments"] += call["function"]["arguments"]
        assert ("".join(pieces), calls) == (case["content"], case["calls"]), cut
        assert all(piece in case["content"] for piece in pieces), (cut, pieces)
