"""The engine refusing a request's structured-output spec (``error_kind``
``invalid_request``: it did not compile, or not within the compile timeout) is a 400 naming
the constraint's field with the engine's message verbatim; any other engine error stays a
500. A constrained stream holds its HTTP head until the engine's first output of choice 0,
so that the refusal is a plain JSON 400 rather than a stream; an unconstrained stream
starts at once, as before.

The engine side is a real :class:`RequestStream` fed by hand (the engine that produces
these errors is exercised end to end by the e2e suite); everything above it, the
generation pipeline, the response writer and the detokenizer, is the serving code."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from engine import protocol as p
from server import response
from server.choice import CompletionChoice
from server.engine_client import RequestStream
from server.generation import Generation
from server.logprobs import TokenTexts
from server.metrics import Metrics
from server.text import ModelText
from server.vllm_metrics import Siblings

COMPILE_ERROR = "regex does not compile: unbalanced parenthesis at position 0"


class Engine:
    """Takes requests as the engine client does: one real RequestStream each."""

    def __init__(self) -> None:
        self.streams: list[RequestStream] = []
        self.aborted: list[str] = []

    def add(self, request: p.EngineCoreRequest) -> RequestStream:
        stream = RequestStream(request.request_id, b"\x00\x00")
        self.streams.append(stream)
        return stream

    def abort(self, stream: RequestStream) -> None:
        self.aborted.append(stream.request_id)

    def put(self, index: int, output: p.EngineCoreOutput) -> None:
        self.streams[index].put(output, 100)


@pytest.fixture(scope="module")
def text() -> ModelText:
    from engine.mock.demo_model import ensure_demo_model

    return ModelText(str(Path(ensure_demo_model())))


def request(
    text: ModelText, engine: Engine, n: int, constraint: str | None
) -> tuple[list[Generation], response.CompletionShapes]:
    metrics = Metrics()
    siblings = Siblings(n)
    sampling = p.SamplingParams(
        max_tokens=8,
        structured_outputs=None if constraint is None else p.StructuredOutputs(regex="("),
    )
    generations = [
        Generation(
            engine,
            f"cmpl-{i}",
            [1, 2, 3],
            sampling,
            text.detokenizer([1, 2, 3]),
            [],
            metrics,
            time.perf_counter(),
            siblings,
            constraint=constraint,
        )
        for i in range(n)
    ]
    texts = TokenTexts(text.backend)
    shapes = response.CompletionShapes(
        "cmpl", 0, "demo", [CompletionChoice(i, None, None, texts) for i in range(n)], [3] * n, 3
    )
    return generations, shapes


def refusal(request_id: str, kind: str | None = "invalid_request") -> p.EngineCoreOutput:
    return p.EngineCoreOutput(
        request_id, [], finish_reason="error", error_message=COMPILE_ERROR, error_kind=kind
    )


class Sent:
    """What the response writer sent, as ASGI messages."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def __call__(self, message: dict[str, Any]) -> None:
        self.messages.append(dict(message))  # the writer reuses its message dict

    @property
    def status(self) -> int:
        return self.messages[0]["status"]

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])


def run_stream(generations: list[Generation], shapes: Any, constrained: bool, feed: Any) -> Sent:
    """``response.stream`` with ``feed(sent)`` called while it waits for the engine."""
    sent = Sent()

    async def main() -> None:
        task = asyncio.ensure_future(
            response.stream(sent, generations, shapes, False, None, 0.0, constrained=constrained)
        )
        await asyncio.sleep(0.05)
        feed(sent)
        await asyncio.wait_for(task, 10)

    asyncio.run(main())
    return sent


def error_body(body: bytes) -> dict[str, Any]:
    return json.loads(body)["error"]


def test_whole_answer_is_a_400_naming_the_constraint(text: ModelText) -> None:
    for name in ("structured_outputs.regex", "response_format", "tools"):
        engine = Engine()
        generations, shapes = request(text, engine, 2, name)
        engine.put(1, refusal("cmpl-1"))
        engine.put(0, p.EngineCoreOutput("cmpl-0", [5, 6], finish_reason="length"))
        status, body = asyncio.run(response.whole(generations, shapes, None, 0.0))
        assert status == 400
        assert error_body(body) == {
            "message": COMPILE_ERROR,
            "type": "BadRequestError",
            "param": name,
            "code": 400,
        }


def test_other_engine_errors_stay_500(text: ModelText) -> None:
    for constraint, kind in (("structured_outputs.json", None), (None, "invalid_request")):
        engine = Engine()
        generations, shapes = request(text, engine, 1, constraint)
        engine.put(0, refusal("cmpl-0", kind))
        status, body = asyncio.run(response.whole(generations, shapes, None, 0.0))
        assert status == 500 and error_body(body)["type"] == "InternalServerError"
        assert error_body(body)["message"] == COMPILE_ERROR


def test_a_constrained_stream_refused_before_its_head_is_a_json_400(text: ModelText) -> None:
    engine = Engine()
    generations, shapes = request(text, engine, 2, "structured_outputs.regex")

    def feed(sent: Sent) -> None:
        assert sent.messages == []  # no head before the engine's first output
        engine.put(0, refusal("cmpl-0"))

    sent = run_stream(generations, shapes, True, feed)
    assert sent.status == 400
    headers = dict(sent.messages[0]["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert error_body(sent.body) == {
        "message": COMPILE_ERROR,
        "type": "BadRequestError",
        "param": "structured_outputs.regex",
        "code": 400,
    }
    assert int(headers[b"content-length"]) == len(sent.body)


def test_a_constrained_stream_starts_with_its_first_output(text: ModelText) -> None:
    engine = Engine()
    generations, shapes = request(text, engine, 2, "structured_outputs.regex")
    ids = text.encode("hello world", False)

    def feed(sent: Sent) -> None:
        assert sent.messages == []
        engine.put(0, p.EngineCoreOutput("cmpl-0", ids[:1]))
        engine.put(0, p.EngineCoreOutput("cmpl-0", ids[1:], finish_reason="stop"))
        engine.put(1, p.EngineCoreOutput("cmpl-1", ids, finish_reason="length"))

    sent = run_stream(generations, shapes, True, feed)
    assert sent.status == 200
    events = [line for line in sent.body.decode().split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: "))["choices"][0] for e in events[:-1]]
    for index, finish in ((0, "stop"), (1, "length")):
        mine = [c for c in chunks if c["index"] == index]
        assert "".join(c["text"] for c in mine) == "hello world"
        assert mine[-1]["finish_reason"] == finish


def test_a_refusal_of_a_later_choice_is_an_error_event(text: ModelText) -> None:
    engine = Engine()
    generations, shapes = request(text, engine, 2, "structured_outputs.regex")

    def feed(sent: Sent) -> None:
        engine.put(0, p.EngineCoreOutput("cmpl-0", [5]))
        engine.put(1, refusal("cmpl-1"))

    sent = run_stream(generations, shapes, True, feed)
    assert sent.status == 200
    events = [line for line in sent.body.decode().split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    assert error_body(events[-2].removeprefix("data: ").encode())["param"] == (
        "structured_outputs.regex"
    )


def test_an_unconstrained_stream_starts_at_once(text: ModelText) -> None:
    engine = Engine()
    generations, shapes = request(text, engine, 1, None)

    def feed(sent: Sent) -> None:
        assert sent.messages and sent.messages[0]["status"] == 200  # before any output
        engine.put(0, p.EngineCoreOutput("cmpl-0", [5], finish_reason="length"))

    assert run_stream(generations, shapes, False, feed).status == 200


def test_a_constrained_stream_whose_engine_fails_otherwise_streams_the_error(
    text: ModelText,
) -> None:
    engine = Engine()
    generations, shapes = request(text, engine, 1, "response_format")

    def feed(sent: Sent) -> None:
        assert sent.messages == []
        engine.put(0, refusal("cmpl-0", None))

    sent = run_stream(generations, shapes, True, feed)
    assert sent.status == 200
    events = [line for line in sent.body.decode().split("\n\n") if line]
    assert events[-1] == "data: [DONE]"
    assert error_body(events[0].removeprefix("data: ").encode())["code"] == 500
