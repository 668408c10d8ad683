"""The response of a generation request: its choices' generations, streamed (SSE, with
keep-alive comments from :mod:`server.output.sse`) or whole (one JSON body), within the
request's deadline; the endpoint's chunk and body shapes come from its ``Shapes``. Mirrors
``rust/server/src/output/response.rs``. Behaviour: docs/api.md, "Responses", "Continuous
usage", "SSE keep-alive".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

import msgspec

from server import openai as s
from server.edge.error import APIError, Dialect, ErrorKind, QueueTimeoutError
from server.logprobs import PromptLogprobs, TokenTexts
from server.output.batch import usage as batch_usage
from server.output.choice import ChatChoice, CompletionChoice
from server.output.content_chunk import ChunkFrame
from server.output.generation import Generation, Piece
from server.output.sse import DONE, KEEP_ALIVE, SSE_HEADERS, event, keep_alive

Send = Callable[[dict[str, Any]], Awaitable[None]]

_encode = msgspec.json.Encoder().encode


class Shapes(Protocol):
    """An endpoint's response shapes for one response (all its choices); as the
    ``Shapes`` trait in ``rust/server/src/output/response.rs``."""

    dialect: Dialect  # the API whose error shape this response's errors take

    def start(self) -> bytes: ...  # events before any text

    def step(self, index: int, piece: Piece, completion_tokens: int = 0,
             cached_tokens: int = 0) -> bytes: ...

    def whole_step(self, index: int, piece: Piece) -> None: ...  # for the whole body

    def usage_of(self, generations: list[Generation]) -> s.Usage: ...

    def body(self, usage: s.Usage) -> bytes: ...  # the whole non-streamed body

    def finish(self, usage: s.Usage, include_usage: bool) -> bytes: ...  # the stream's tail

    def failure(self, error: APIError) -> bytes: ...  # a failure after the stream began


class _Shapes:
    """What chat and completions shapes share: the id line, each choice's prompt length
    (``prompt_tokens[i]``), the choices per prompt (``n``), continuous usage."""

    def __init__(self, rid: str, created: int, model: str, prompt_tokens: list[int],
                 n: int, continuous: bool) -> None:
        self.rid, self.created, self.model = rid, created, model
        self.prompt_tokens = prompt_tokens
        self.n = n
        self.continuous = continuous

    def running(self, index: int, completion_tokens: int,
                cached_tokens: int = 0) -> s.Usage | None:
        """A chunk's usage (continuous usage stats), else None."""
        if not self.continuous:
            return None
        return s.Usage.of(self.prompt_tokens[index], completion_tokens, cached_tokens)

    def usage_of(self, generations: list[Generation]) -> s.Usage:
        """The usage of a response: each prompt once, the completions of every choice."""
        return batch_usage(generations, self.n)

    dialect = Dialect.OPENAI

    def finish(self, usage: s.Usage, include_usage: bool) -> bytes:
        """The stream's tail: the ``include_usage`` chunk (each subclass's ``usage``) when
        asked for, then [DONE]."""
        return (self.usage(usage) if include_usage else b"") + DONE  # type: ignore[attr-defined]

    def failure(self, error: APIError) -> bytes:
        """The error event, then [DONE]."""
        return b"data: " + error.to_json() + b"\n\n" + DONE


class ChatShapes(_Shapes):
    """Chat chunks and bodies for one response (``prompt_top``: the request's
    ``prompt_logprobs``; ``prompt_ids``: the prompt's ids, shown with return_token_ids).
    ``prompt_tokens``: the one prompt's length, all choices its; or a list, each choice's
    own prompt's (a batch of conversations, one choice each)."""

    def __init__(self, rid: str, created: int, model: str, choices: list[ChatChoice],
                 prompt_tokens: int | list[int], continuous: bool = False,
                 prompt_top: int | None = None, texts: TokenTexts | None = None, *,
                 prompt_ids: list[int] | None = None) -> None:
        if isinstance(prompt_tokens, list):
            super().__init__(rid, created, model, prompt_tokens, 1, continuous)
        else:
            super().__init__(rid, created, model, [prompt_tokens] * len(choices),
                             len(choices), continuous)
        self.choices = choices
        self._prompt_ids = prompt_ids
        self._prompt_top = prompt_top
        self._texts = texts
        self.prompt_logprobs: PromptLogprobs | None = None
        self._prompt_sent = False
        self._frame = ChunkFrame(s.ChatCompletionChunk(id=rid, created=created, model=model,
                                                       choices=[]))

    def _chunk(self, choices: list[s.ChatChunkChoice], usage: s.Usage | None = None) -> bytes:
        chunk = s.ChatCompletionChunk(id=self.rid, created=self.created, model=self.model,
                                      choices=choices)
        if usage is not None:
            chunk.usage = usage
        return event(chunk)

    def start(self) -> bytes:
        """The role (and echo) chunks; with ``prompt_logprobs`` they wait for the engine's
        first output, so that the prompt logprobs ride on the very first chunk."""
        if self._prompt_top is not None and not self._prompt_sent:
            return b""
        return self._opening(None)

    def _opening(self, prompt_logprobs: PromptLogprobs | None) -> bytes:
        role = s.Delta(role="assistant", content="")
        chunks = [s.ChatCompletionChunk(
            id=self.rid, created=self.created, model=self.model,
            choices=[s.ChatChunkChoice(c.index, role, None, None)]) for c in self.choices]
        if self._prompt_ids is not None:  # on each choice's role chunk, as vLLM
            for chunk in chunks:
                chunk.prompt_token_ids = self._prompt_ids
        chunks += [s.ChatCompletionChunk(
            id=self.rid, created=self.created, model=self.model,
            choices=[s.ChatChunkChoice(c.index, s.Delta(content=c.echo), None, None)])
            for c in self.choices if c.echo]
        for chunk in chunks:
            usage = self.running(chunk.choices[0].index, 0)
            if usage is not None:
                chunk.usage = usage
        if chunks and prompt_logprobs is not None:
            chunks[0].prompt_logprobs = prompt_logprobs
        return b"".join(event(chunk) for chunk in chunks)

    def running(self, index: int, completion_tokens: int,
                cached_tokens: int = 0) -> s.Usage | None:
        """A chunk's usage (continuous usage stats) with the choice's reasoning tokens."""
        usage = super().running(index, completion_tokens, cached_tokens)
        reasoning = self.choices[index].reasoning_tokens
        if usage is not None and reasoning is not None:
            usage.completion_tokens_details = s.CompletionTokensDetails(reasoning)
        return usage

    def usage_of(self, generations: list[Generation]) -> s.Usage:
        """The usage of every choice, with their reasoning tokens."""
        usage = super().usage_of(generations)
        counts = [c.reasoning_tokens for c in self.choices]
        if counts and counts[0] is not None:
            usage.completion_tokens_details = s.CompletionTokensDetails(
                sum(c or 0 for c in counts))
        return usage

    def _take_prompt_logprobs(self, piece: Piece) -> None:
        if (self._prompt_top is not None and self.prompt_logprobs is None
                and self._texts is not None and piece.prompt_logprobs is not None):
            self.prompt_logprobs = self._texts.prompt(piece.prompt_logprobs, self._prompt_top)

    def step(self, index: int, piece: Piece, completion_tokens: int = 0,
             cached_tokens: int = 0) -> bytes:
        self._take_prompt_logprobs(piece)
        opening = b""
        if self._prompt_top is not None and not self._prompt_sent:
            self._prompt_sent = True  # the deferred opening chunks, the first carrying them
            opening = self._opening(self.prompt_logprobs or [None])
        delta = self.choices[index].step(piece)
        if delta.is_empty():
            return opening
        chunk = self._frame.chat_event(index, delta,
                                       self.running(index, completion_tokens, cached_tokens))
        return opening + chunk if opening else chunk

    def usage(self, usage: s.Usage) -> bytes:
        return self._chunk([], usage)

    def body(self, usage: s.Usage) -> bytes:
        body = s.ChatCompletion(id=self.rid, created=self.created, model=self.model,
                                choices=[c.choice() for c in self.choices], usage=usage)
        if self._prompt_top is not None:
            body.prompt_logprobs = self.prompt_logprobs or [None]
        if self._prompt_ids is not None:
            body.prompt_token_ids = self._prompt_ids
        return _encode(body)

    def whole_step(self, index: int, piece: Piece) -> None:
        self._take_prompt_logprobs(piece)
        self.choices[index].step(piece)


class CompletionShapes(_Shapes):
    """Completions chunks and bodies for one response (its choices in index order, each
    with its prompt's length in ``prompt_tokens``, ``n`` per prompt)."""

    def __init__(self, rid: str, created: int, model: str, choices: list[CompletionChoice],
                 prompt_tokens: list[int], n: int, continuous: bool = False) -> None:
        super().__init__(rid, created, model, prompt_tokens, n, continuous)
        self.choices = choices
        self._frame = ChunkFrame(s.Completion(id=rid, created=created, model=model, choices=[]))

    def start(self) -> bytes:
        return b""

    def step(self, index: int, piece: Piece, completion_tokens: int = 0,
             cached_tokens: int = 0) -> bytes:
        return self._frame.event(_encode(self.choices[index].step(piece)),
                                 self.running(index, completion_tokens, cached_tokens))

    def whole_step(self, index: int, piece: Piece) -> None:
        self.choices[index].step(piece)

    def usage(self, usage: s.Usage) -> bytes:
        return event(s.Completion(id=self.rid, created=self.created, model=self.model,
                                  choices=[], usage=usage))

    def body(self, usage: s.Usage) -> bytes:
        return _encode(s.Completion(id=self.rid, created=self.created, model=self.model,
                                    choices=[c.choice() for c in self.choices], usage=usage))



async def pieces(generations: list[Generation],
                 first: Piece | None = None) -> AsyncIterator[list[tuple[int, Piece]]]:
    """The choices' pieces as they come (each batch in index order); ``first``: choice 0's
    first piece, already taken."""
    if first is not None:
        yield [(0, first)]
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


async def whole(generations: list[Generation], shapes: Shapes, deadline: float | None,
                timeout_s: float) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """(status, body, extra headers) of a non-streamed response."""
    try:
        async with _deadline(deadline):
            async for batch in pieces(generations):
                for index, piece in batch:
                    shapes.whole_step(index, piece)
    except TimeoutError:
        error = timeout_error(timeout_s)
        return error.status_in(shapes.dialect), error.to_json(shapes.dialect), error.headers
    except APIError as error:
        return error.status_in(shapes.dialect), error.to_json(shapes.dialect), error.headers
    return 200, shapes.body(shapes.usage_of(generations)), []


async def stream(send: Send, generations: list[Generation], shapes: Shapes,
                 include_usage: bool, deadline: float | None, timeout_s: float,
                 constrained: bool = False, keep_alive_s: float | None = None) -> None:
    """The SSE response. Its status is 200, except for a ``constrained`` request whose
    spec the engine refused: it waits for choice 0's first piece before the head, and
    answers that refusal (a 400), or the queue's wait limit (a 503), as a JSON error
    body."""
    first: Piece | None = None
    early: APIError | TimeoutError | None = None  # what ends the stream before it starts
    if constrained:
        try:
            async with _deadline(deadline):
                first = await generations[0].next()
        except APIError as error:
            if error.kind is ErrorKind.BAD_REQUEST or isinstance(error, QueueTimeoutError):
                body = error.to_json(shapes.dialect)
                await send({"type": "http.response.start",
                            "status": error.status_in(shapes.dialect),
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()),
                                        *error.headers]})
                await send({"type": "http.response.body", "body": body})
                return
            early = error
        except TimeoutError as error:
            early = error
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
    message: dict[str, Any] = {"type": "http.response.body", "more_body": True}
    start = shapes.start()
    if start:
        message["body"] = start
        await send(message)
    try:
        if early is not None:
            raise early
        async with _deadline(deadline):
            if keep_alive_s is None and len(generations) == 1:
                await _send_one(send, message, generations[0], shapes, first)
            else:
                await _send_batches(send, message, generations, shapes, first, keep_alive_s)
    except TimeoutError:
        await send({"type": "http.response.body", "body": shapes.failure(timeout_error(timeout_s))})
        return
    except APIError as error:
        await send({"type": "http.response.body", "body": shapes.failure(error)})
        return
    await send({"type": "http.response.body",
                "body": shapes.finish(shapes.usage_of(generations), include_usage)})


async def _send_one(send: Send, message: dict[str, Any], generation: Generation,
                    shapes: Shapes, piece: Piece | None) -> None:
    """One choice, no keep-alive: each piece straight to its event, no batch in between
    (``piece``: its first, already taken)."""
    if piece is None:
        piece = await generation.next()
    while piece is not None:
        body = shapes.step(0, piece, generation.completion_tokens, generation.cached_tokens)
        if body:
            message["body"] = body
            await send(message)
        piece = await generation.next()


async def _send_batches(send: Send, message: dict[str, Any], generations: list[Generation],
                        shapes: Shapes, first: Piece | None, keep_alive_s: float | None) -> None:
    """The choices' batches of pieces as they come, with keep-alive comments."""
    async for batch in keep_alive(pieces(generations, first), keep_alive_s):
        if batch is None:
            message["body"] = KEEP_ALIVE
            await send(message)
            continue
        body = b"".join(shapes.step(index, piece, generations[index].completion_tokens,
                                    generations[index].cached_tokens)
                        for index, piece in batch)
        if body:
            message["body"] = body
            await send(message)
