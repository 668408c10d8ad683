"""The response of a generation request: its choices' generations, streamed (SSE) or
whole (one JSON body), within the request's deadline.

Mirrors ``rust/server/src/output/response.rs``. SSE: ``data: {json}\\n\\n`` events ending with
``data: [DONE]\\n\\n``. Chat starts with a role chunk per choice; a choice's chunks carry
its ``index``; a piece that adds nothing visible (text held back by a parser) sends no
chunk unless it carries logprobs or the finish reason; with
``stream_options.include_usage`` a chunk with no choices and the usage (all choices
together) comes before ``[DONE]``. A failure after the stream started, or the deadline
(``--request-timeout``), is an error event, then ``[DONE]``; not streamed, they are the
error's status (504 for the deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgspec

from server import openai as s
from server.choice import ChatChoice, CompletionChoice
from server.error import APIError, ErrorKind
from server.generation import Generation, Piece

Send = Callable[[dict[str, Any]], Awaitable[None]]

_encode = msgspec.json.Encoder().encode
SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
               (b"x-accel-buffering", b"no")]
DONE = b"data: [DONE]\n\n"


def event(value: msgspec.Struct) -> bytes:
    return b"data: " + _encode(value) + b"\n\n"


def usage_of(generations: list[Generation]) -> s.Usage:
    """The usage of a response: the prompt once, the completions of every choice."""
    prompt = generations[0].prompt_tokens
    completion = sum(g.completion_tokens for g in generations)
    return s.Usage(prompt, completion, prompt + completion)


class ChatShapes:
    """Chat chunks and bodies for one response."""

    def __init__(self, rid: str, created: int, model: str, choices: list[ChatChoice]) -> None:
        self.rid, self.created, self.model = rid, created, model
        self.choices = choices

    def _chunk(self, choices: list[s.ChatChunkChoice], usage: s.Usage | None = None) -> bytes:
        chunk = s.ChatCompletionChunk(id=self.rid, created=self.created, model=self.model,
                                      choices=choices)
        if usage is not None:
            chunk.usage = usage
        return event(chunk)

    def start(self) -> bytes:
        role = s.Delta(role="assistant", content="")
        return b"".join(self._chunk([s.ChatChunkChoice(c.index, role, None, None)])
                        for c in self.choices)

    def step(self, index: int, piece: Piece) -> bytes:
        delta = self.choices[index].step(piece)
        if delta.is_empty():
            return b""
        logprobs = None if delta.logprobs is None else s.ChatLogprobs(delta.logprobs)
        return self._chunk([s.ChatChunkChoice(index, delta.delta(), logprobs, delta.finish)])

    def usage(self, usage: s.Usage) -> bytes:
        return self._chunk([], usage)

    def body(self, usage: s.Usage) -> bytes:
        return _encode(s.ChatCompletion(id=self.rid, created=self.created, model=self.model,
                                        choices=[c.choice() for c in self.choices],
                                        usage=usage))


class CompletionShapes:
    """Completions chunks and bodies for one response."""

    def __init__(self, rid: str, created: int, model: str,
                 choices: list[CompletionChoice]) -> None:
        self.rid, self.created, self.model = rid, created, model
        self.choices = choices

    def start(self) -> bytes:
        return b""

    def step(self, index: int, piece: Piece) -> bytes:
        text, logprobs, finish = self.choices[index].step(piece)
        choice = s.CompletionChoice(index, text, logprobs, finish)
        return event(s.Completion(id=self.rid, created=self.created, model=self.model,
                                  choices=[choice]))

    def usage(self, usage: s.Usage) -> bytes:
        return event(s.Completion(id=self.rid, created=self.created, model=self.model,
                                  choices=[], usage=usage))

    def body(self, usage: s.Usage) -> bytes:
        return _encode(s.Completion(id=self.rid, created=self.created, model=self.model,
                                    choices=[c.choice() for c in self.choices], usage=usage))


Shapes = ChatShapes | CompletionShapes


async def pieces(generations: list[Generation]) -> AsyncIterator[list[tuple[int, Piece]]]:
    """The choices' pieces as they come (each batch in index order)."""
    if len(generations) == 1:
        generation = generations[0]
        while (piece := await generation.next()) is not None:
            yield [(0, piece)]
        return
    pending = {asyncio.ensure_future(g.next()): i for i, g in enumerate(generations)}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            batch = []
            for future in done:
                index = pending.pop(future)
                piece = future.result()
                if piece is None:
                    continue
                batch.append((index, piece))
                if piece.finish is None:
                    pending[asyncio.ensure_future(generations[index].next())] = index
            batch.sort(key=lambda item: item[0])
            yield batch
    finally:
        for future in pending:
            future.cancel()


def _deadline(deadline: float | None) -> contextlib.AbstractAsyncContextManager[Any]:
    if deadline is None:
        return contextlib.nullcontext()
    loop = asyncio.get_running_loop()
    return asyncio.timeout_at(loop.time() + max(0.0, deadline - time.monotonic()))


def timeout_error(seconds: float) -> APIError:
    return APIError(ErrorKind.TIMEOUT, f"the request did not finish within the server's "
                                       f"request timeout of {seconds:g} s")


async def whole(generations: list[Generation], shapes: Shapes,
                deadline: float | None, timeout_s: float) -> tuple[int, bytes]:
    """(status, body) of a non-streamed response."""
    try:
        async with _deadline(deadline):
            async for batch in pieces(generations):
                for index, piece in batch:
                    shapes.choices[index].step(piece)
    except TimeoutError:
        return ErrorKind.TIMEOUT.status, timeout_error(timeout_s).to_json()
    except APIError as error:
        return error.status, error.to_json()
    return 200, shapes.body(usage_of(generations))


async def stream(send: Send, generations: list[Generation], shapes: Shapes,
                 include_usage: bool, deadline: float | None, timeout_s: float) -> None:
    """The SSE response (its status line already decided: 200)."""
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    message: dict[str, Any] = {"type": "http.response.body", "more_body": True}
    start = shapes.start()
    if start:
        message["body"] = start
        await send(message)
    try:
        async with _deadline(deadline):
            async for batch in pieces(generations):
                body = b"".join(shapes.step(index, piece) for index, piece in batch)
                if body:
                    message["body"] = body
                    await send(message)
    except TimeoutError:
        await send({"type": "http.response.body",
                    "body": b"data: " + timeout_error(timeout_s).to_json() + b"\n\n" + DONE})
        return
    except APIError as error:
        await send({"type": "http.response.body",
                    "body": b"data: " + error.to_json() + b"\n\n" + DONE})
        return
    tail = shapes.usage(usage_of(generations)) if include_usage else b""
    await send({"type": "http.response.body", "body": tail + DONE})
