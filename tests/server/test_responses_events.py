"""A chat choice's deltas as Responses items and typed SSE events
(server/routes/responses/events.py): item order, every event's fields and sequence numbers, the
whole body, ``incomplete`` on length, the error event."""

from __future__ import annotations

import json
from typing import Any

import pytest

from server import openai as s
from server.edge.error import APIError, ErrorKind
from server.output.choice import ChatChoice
from server.output.generation import Piece
from server.parsers.reasoning import markers_of
from server.parsers.tools import ToolSettings
from server.parsers.tools.formats import DEMO_BEGIN, DEMO_END
from server.routes.responses.events import ResponseShapes
from server.routes.responses.request import Echo
from server.validate.prompt import ChatOutput

pytestmark = pytest.mark.unit

WEATHER = {"type": "function", "function": {"name": "get_weather"}}
REPLY = ("Two plus two.</think>Let me check." + DEMO_BEGIN
         + '{"name": "get_weather", "arguments": {"city": "Paris"}}' + DEMO_END + " Done.")


def shapes() -> ResponseShapes:
    chat = ChatOutput(ToolSettings([WEATHER], "auto", None, True), "demo", False, True)
    choice = ChatChoice(0, chat, markers_of("deepseek_r1"), None, None)  # type: ignore[arg-type]
    return ResponseShapes("ab" * 16, 7, "demo", choice, ("p", [1, 2, 3, 4, 5]), Echo())


def events(raw: bytes) -> list[dict[str, Any]]:
    out = []
    for block in raw.decode().split("\n\n"):
        if not block:
            continue
        head, data = block.split("\n")
        event = json.loads(data.removeprefix("data: "))
        assert head == f"event: {event['type']}"
        assert list(event)[:2] == ["type", "sequence_number"]
        out.append(event)
    return out


def feed(target: ResponseShapes, text: str, finish: str, size: int = 3) -> bytes:
    out = target.start()
    cuts = [text[i:i + size] for i in range(0, len(text), size)]
    for i, cut in enumerate(cuts):
        out += target.step(0, Piece(cut, finish if i == len(cuts) - 1 else None, []))
    return out + target.finish(s.Usage.of(5, 20, 3), False)


def test_stream_items_and_events_in_order() -> None:
    target = shapes()
    seen = events(feed(target, REPLY, "stop"))
    assert [e["sequence_number"] for e in seen] == list(range(len(seen)))
    kinds = [e["type"] for e in seen]
    assert kinds[:4] == ["response.created", "response.in_progress",
                         "response.output_item.added", "response.content_part.added"]
    assert seen[0]["response"]["status"] == "in_progress"
    assert seen[0]["response"]["output"] == [] and seen[0]["response"]["usage"] is None
    compact = [k for i, k in enumerate(kinds) if i == 0 or k != kinds[i - 1]]
    assert compact == [
        "response.created", "response.in_progress",
        "response.output_item.added", "response.content_part.added",
        "response.reasoning_text.delta", "response.reasoning_text.done",
        "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done",
        "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    final = seen[-1]["response"]
    assert final["status"] == "completed" and final["incomplete_details"] is None
    output = final["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call",
                                                 "message"]
    assert output[0]["content"] == [{"type": "reasoning_text", "text": "Two plus two."}]
    assert output[1]["content"][0]["text"] == "Let me check."
    call = output[2]
    assert (call["name"], json.loads(call["arguments"])) == ("get_weather", {"city": "Paris"})
    assert call["call_id"].startswith("call_") and call["id"].startswith("fc_")
    assert output[3]["content"][0]["text"].strip() == "Done."
    deltas = "".join(e["delta"] for e in seen
                     if e["type"] == "response.function_call_arguments.delta")
    assert deltas == call["arguments"]
    added = [e for e in seen if e["type"] == "response.output_item.added"]
    assert [e["output_index"] for e in added] == [0, 1, 2, 3]
    assert added[2]["item"]["arguments"] == "" and added[2]["item"]["status"] == "in_progress"
    assert final["usage"] == {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 3,
                                                                       "cache_write_tokens": 0},
                              "output_tokens": 20,
                              "output_tokens_details": {"reasoning_tokens": 0},
                              "total_tokens": 25}
    assert final["id"] == "resp_" + "ab" * 16


def test_whole_body_matches_the_stream() -> None:
    streamed = events(feed(shapes(), REPLY, "stop"))[-1]["response"]
    target = shapes()
    for i in range(0, len(REPLY), 4):
        target.whole_step(0, Piece(REPLY[i:i + 4], "stop" if i + 4 >= len(REPLY) else None, []))
    body = json.loads(target.body(s.Usage.of(5, 20, 3)))
    assert list(body) == list(streamed) == [
        "id", "object", "created_at", "status", "error", "incomplete_details", "instructions",
        "max_output_tokens", "model", "output", "parallel_tool_calls", "previous_response_id",
        "reasoning", "store", "temperature", "text", "tool_choice", "tools", "top_logprobs",
        "top_p", "truncation", "usage", "user", "metadata"]

    def strip(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in item.items() if k not in ("id", "call_id")} for item in items]

    assert strip(body["output"]) == strip(streamed["output"])
    assert (body["temperature"], body["top_p"], body["text"], body["tools"]) == (
        1.0, 1.0, {"format": {"type": "text"}}, [])


def test_length_is_incomplete() -> None:
    seen = events(feed(shapes(), "Two plus", "length"))
    final = seen[-1]
    assert final["type"] == "response.incomplete"
    assert final["response"]["status"] == "incomplete"
    assert final["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["response"]["output"][0]["type"] == "reasoning"


def test_failure_is_an_error_event() -> None:
    target = shapes()
    target.start()
    raw = target.failure(APIError(ErrorKind.INTERNAL, "engine failed"))
    assert events(raw) == [{"type": "error", "sequence_number": 2,
                            "code": "InternalServerError", "message": "engine failed",
                            "param": None}]
