"""A chat choice's pieces as an Anthropic message (server/routes/messages/events.py): the blocks
in generation order, the SSE event sequence, stop reasons, tool_use inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server import openai as s
from server.edge.error import APIError, Dialect, ErrorKind
from server.output.choice import ChatChoice
from server.output.generation import Piece
from server.parsers.reasoning import markers_of
from server.parsers.tools import ToolSettings
from server.routes.messages.events import MessageShapes, stop_reason, tool_input
from server.validate.prompt import ChatOutput

pytestmark = pytest.mark.unit

BEGIN, END = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def shapes(inside: bool = True) -> MessageShapes:
    output = ChatOutput(tools=ToolSettings(TOOLS, "auto", None, True), tool_parser="demo",
                        prefilled=False, reasoning_inside=inside)
    choice = ChatChoice(0, output, markers_of("deepseek_r1"), None, None)  # type: ignore[arg-type]
    return MessageShapes("ab" * 16, "demo", choice, 7)


def feed(message: MessageShapes, text: str, finish: str, size: int = 5,
         stop: str | None = None) -> bytes:
    out = message.start()
    cuts = [text[i:i + size] for i in range(0, len(text), size)] or [""]
    for k, cut in enumerate(cuts):
        last = k == len(cuts) - 1
        piece = Piece(cut, finish if last else None, [])
        out += message.push(message.choice.step(piece), stop if last else None)
    return out + message.end(s.Usage.of(7, 11, 4))


def events(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for chunk in raw.decode().split("\n\n")[:-1]:
        head, data = chunk.split("\n")
        assert head.startswith("event: ") and data.startswith("data: ")
        body = json.loads(data.removeprefix("data: "))
        assert body["type"] == head.removeprefix("event: ")
        out.append((body["type"], body))
    return out


# The usage of 7 prompt tokens, 4 of them from the prefix cache, and 11 output tokens
# (message_start has the whole prompt and no cache keys: not known before the output).
SPLIT = {"input_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 4,
         "output_tokens": 11}
REPLY = "I think.</think>Let me check." + BEGIN + \
    '{"name": "get_weather", "arguments": {"city": "Paris"}}' + END


def test_blocks_in_generation_order_streamed_and_whole() -> None:
    streamed = events(feed(message := shapes(), REPLY, "stop"))
    kinds = [kind for kind, _ in streamed]
    assert kinds[:2] == ["message_start", "ping"] and kinds[-2:] == ["message_delta",
                                                                     "message_stop"]
    start = streamed[0][1]["message"]
    assert start == {"id": "msg_" + "ab" * 16, "type": "message", "role": "assistant",
                     "model": "demo", "content": [], "stop_reason": None,
                     "stop_sequence": None, "usage": {"input_tokens": 7, "output_tokens": 0}}
    opened = [body["content_block"] for kind, body in streamed if kind == "content_block_start"]
    assert [b["type"] for b in opened] == ["thinking", "text", "tool_use"]
    assert opened[2]["name"] == "get_weather" and opened[2]["input"] == {}
    text: dict[int, str] = {}
    for kind, body in streamed:
        if kind == "content_block_delta":
            delta = body["delta"]
            text[body["index"]] = text.get(body["index"], "") + (
                delta.get("thinking") or delta.get("text") or delta.get("partial_json") or "")
    assert text[0] == "I think." and text[1] == "Let me check."
    assert json.loads(text[2]) == {"city": "Paris"}
    stops = [body["index"] for kind, body in streamed if kind == "content_block_stop"]
    assert stops == [0, 1, 2]
    # each block's start < its deltas < its stop; a block stops before the next starts
    order = [(kind, body.get("index")) for kind, body in streamed if "index" in body]
    for index in range(3):
        mine = [k for k, i in order if i == index]
        assert mine[0] == "content_block_start" and mine[-1] == "content_block_stop"
    assert streamed[-2][1] == {"type": "message_delta", "delta": {
        "stop_reason": "tool_use", "stop_sequence": None}, "usage": SPLIT}
    body = json.loads(message.whole(s.Usage.of(7, 11, 4)))
    assert body["content"] == [
        {"type": "thinking", "thinking": "I think.", "signature": ""},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": opened[2]["id"], "name": "get_weather",
         "input": {"city": "Paris"}}]
    assert (body["stop_reason"], body["stop_sequence"], body["usage"]) == (
        "tool_use", None, SPLIT)
    assert list(body) == ["id", "type", "role", "model", "content", "stop_reason",
                          "stop_sequence", "usage"]


def test_every_piece_size_gives_the_same_blocks() -> None:
    wholes = set()
    for size in (1, 2, 3, 7, 100):
        message = shapes()
        feed(message, REPLY, "stop", size)
        body = json.loads(message.whole(s.Usage.of(7, 1)))
        body["content"][2]["id"] = "x"
        wholes.add(json.dumps(body))
    assert len(wholes) == 1


def test_stop_reasons() -> None:
    assert stop_reason("stop", None) == "end_turn"
    assert stop_reason("stop", "END") == "stop_sequence"
    assert stop_reason("length", None) == "max_tokens"
    assert stop_reason("tool_calls", None) == "tool_use"
    message = shapes(inside=False)
    streamed = events(feed(message, "plain text", "stop", stop="END"))
    assert streamed[-2][1]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "END"}
    assert json.loads(message.whole(s.Usage.of(7, 2)))["stop_sequence"] == "END"
    assert [b["type"] for b in json.loads(message.whole(s.Usage.of(7, 2)))["content"]] == [
        "text"]


def test_a_call_cut_by_max_tokens_has_empty_input() -> None:
    assert tool_input('{"city": "Par') == {} and tool_input("[1]") == {}
    assert tool_input('{"a": {"b": 1}, "c": 2}') == {"a": {"b": 1}, "c": 2}
    message = shapes(inside=False)
    feed(message, BEGIN + '{"name": "get_weather", "arguments": {"city": "Par', "length")
    body = json.loads(message.whole(s.Usage.of(7, 3)))
    assert body["stop_reason"] == "max_tokens"
    assert [b.get("input") for b in body["content"] if b["type"] == "tool_use"] in ([{}], [])


def test_an_empty_answer_has_no_blocks() -> None:
    message = shapes(inside=False)
    streamed = events(feed(message, "", "length"))
    assert [kind for kind, _ in streamed] == ["message_start", "ping", "message_delta",
                                              "message_stop"]
    assert json.loads(message.whole(s.Usage.of(7, 0)))["content"] == []


def test_a_failure_after_the_start_is_an_error_event() -> None:
    message = shapes()
    timeout = APIError(ErrorKind.TIMEOUT, "too slow")
    assert message.failure(timeout) == (
        b'event: error\ndata: {"type":"error","error":{"type":"timeout_error",'
        b'"message":"too slow"}}\n\n')
    dead = APIError(ErrorKind.ENGINE_DEAD, "gone")
    assert b'"type":"overloaded_error"' in message.failure(dead)
    assert message.dialect is Dialect.ANTHROPIC
