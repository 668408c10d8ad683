"""The OpenAI-compatible HTTP routes, as a plain ASGI application (served by uvicorn).

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions`` (JSON, or SSE when
``stream`` is true), ``GET /v1/models``, ``GET /health``; anything else is a JSON 404, a
known path with the wrong method a JSON 405. Same shapes, statuses and check order as
the Rust frontend (``rust/cli/src/{server,chat,completions,response}.rs``):

body (413 over 32 MiB) -> JSON, keys, types, values (400) -> model (404) -> messages /
prompt -> template + tokenization, off the event loop (400 on a template error) ->
context length (400) -> engine (503 when it is dead).

SSE: ``data: {json}\\n\\n`` events, ending with ``data: [DONE]\\n\\n``. Chat starts with a
role chunk; the finish_reason rides on the last text chunk; with
``stream_options.include_usage`` a chunk with no choices and the usage comes before
``[DONE]``. A failure after the stream started is an error event, then ``[DONE]``. A
client that disconnects aborts its engine request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

import msgspec

from engine.frontend import params
from engine.frontend import schema as s
from engine.frontend.client import ClientDisconnected, EngineClient
from engine.frontend.errors import APIError, ErrorKind, engine_dead
from engine.frontend.generation import Generation
from engine.frontend.prompt import Prompt, PromptBuilder
from engine.frontend.text import ModelText

logger = logging.getLogger("vrs.frontend")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Handler = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY_BYTES = 32 * 1024 * 1024
_encode = msgspec.json.Encoder().encode
_JSON = (b"content-type", b"application/json")
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no")]
_DONE = b"data: [DONE]\n\n"


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


async def read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise APIError(ErrorKind.PAYLOAD_TOO_LARGE, "request body is larger than the limit "
                           f"of {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_json(send: Send, status: int, body: bytes,
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers = [_JSON, (b"content-length", str(len(body)).encode()), *(extra or ())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, error: APIError,
                      extra: list[tuple[bytes, bytes]] | None = None) -> None:
    await send_json(send, error.status, error.to_json(), extra)


def model_list(name: str, created: int, root: str, max_model_len: int) -> bytes:
    """The ``GET /v1/models`` body: the one served model."""
    card = s.ModelCard(id=name, created=created, root=root, max_model_len=max_model_len)
    return _encode(s.ModelList(data=[card]))


def _event(value: msgspec.Struct) -> bytes:
    return b"data: " + _encode(value) + b"\n\n"


async def _watch_disconnect(receive: Receive, generation: Generation) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    generation.cancel()


async def dispatch(routes: dict[str, tuple[str, Handler]], scope: Scope, receive: Receive,
                   send: Send) -> None:
    """Routes one ASGI request: JSON 404 / 405, APIError bodies, 500 for our own bugs."""
    if scope["type"] != "http":
        return
    path = scope["path"]
    route = routes.get(path)
    try:
        if route is None:
            raise APIError(ErrorKind.NOT_FOUND, f"Not Found: {path}")
        method, handler = route
        if scope["method"] != method:
            await send_error(send, APIError(ErrorKind.METHOD_NOT_ALLOWED,
                                            f"Method Not Allowed: {scope['method']} {path}"),
                             [(b"allow", method.encode())])
            return
        await handler(scope, receive, send)
    except APIError as error:
        await send_error(send, error)
    except ClientGone:
        return
    except Exception:  # our bug: a 500 with the error body, if the response has not begun
        logger.exception("internal error on %s %s", scope["method"], path)
        with contextlib.suppress(Exception):
            await send_error(send, APIError(ErrorKind.INTERNAL, "internal server error"))


class App:
    """The ASGI callable; ``client`` must be started before requests arrive."""

    def __init__(self, client: EngineClient, text: ModelText, served_model_name: str,
                 model_root: str, executor: Executor) -> None:
        self.client = client
        self.text = text
        self.model_name = served_model_name
        self.model_root = model_root
        self.prompts = PromptBuilder(text, served_model_name, client, executor)
        self.created = int(time.time())
        self._routes: dict[str, tuple[str, Handler]] = {
            "/v1/chat/completions": ("POST", self.chat_completions),
            "/v1/completions": ("POST", self.completions),
            "/v1/models": ("GET", self.models),
            "/health": ("GET", self.health),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await dispatch(self._routes, scope, receive, send)

    # ------------------------------------------------------------------ simple routes

    async def health(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.client.dead_reason is not None:
            raise engine_dead(self.client.dead_reason)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    async def models(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, model_list(self.model_name, self.created, self.model_root,
                                              self.client.max_model_len))

    # ------------------------------------------------------------------ generation

    def _start(self, prefix: str, prompt: Prompt) -> Generation:
        settings = prompt.settings
        detok = self.text.detokenizer(prompt.ids, settings.skip_special_tokens)
        return Generation(self.client, f"{prefix}-{uuid.uuid4().hex}", prompt.ids,
                          settings.sampling, detok, settings.stop)

    async def chat_completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        prompt = await self.prompts.chat(await read_body(receive))
        generation = self._start("chatcmpl", prompt)
        await self._run(receive, send, generation, prompt.settings, chat=True)

    async def completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        prompt = await self.prompts.completion(await read_body(receive))
        generation = self._start("cmpl", prompt)
        await self._run(receive, send, generation, prompt.settings, chat=False)

    async def _run(self, receive: Receive, send: Send, generation: Generation,
                   settings: params.Settings, chat: bool) -> None:
        watcher = asyncio.ensure_future(_watch_disconnect(receive, generation))
        try:
            if settings.stream:
                await self._stream(send, generation, settings.include_usage, chat)
            else:
                await self._whole(send, generation, chat)
        except ClientDisconnected:
            logger.debug("%s: the client went away", generation.request_id)
        finally:
            watcher.cancel()
            generation.close()

    @staticmethod
    def _usage(generation: Generation) -> s.Usage:
        return s.Usage(generation.prompt_tokens, generation.completion_tokens,
                       generation.prompt_tokens + generation.completion_tokens)

    async def _whole(self, send: Send, generation: Generation, chat: bool) -> None:
        try:
            text = await generation.text()
        except APIError as error:
            await send_error(send, error)
            return
        reason = generation.finish_reason or "stop"
        header = {"id": generation.request_id, "created": int(time.time()),
                  "model": self.model_name, "usage": self._usage(generation)}
        response: msgspec.Struct
        if chat:
            choice = s.ChatChoice(0, s.AssistantMessage("assistant", text), None, reason)
            response = s.ChatCompletion(choices=[choice], **header)
        else:
            response = s.Completion(choices=[s.CompletionChoice(0, text, None, reason)],
                                    **header)
        await send_json(send, 200, _encode(response))

    async def _stream(self, send: Send, generation: Generation, include_usage: bool,
                      chat: bool) -> None:
        rid, created, model = generation.request_id, int(time.time()), self.model_name

        def chunk(text: str, finish: str | None) -> bytes:
            if chat:
                delta = s.Delta(content=text) if text else s.Delta()
                return _event(s.ChatCompletionChunk(
                    id=rid, created=created, model=model,
                    choices=[s.ChatChunkChoice(0, delta, None, finish)]))
            return _event(s.Completion(id=rid, created=created, model=model,
                                       choices=[s.CompletionChoice(0, text, None, finish)]))

        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        message: dict[str, Any] = {"type": "http.response.body", "more_body": True}
        if chat:
            message["body"] = _event(s.ChatCompletionChunk(
                id=rid, created=created, model=model,
                choices=[s.ChatChunkChoice(0, s.Delta(role="assistant", content=""), None,
                                           None)]))
            await send(message)
        try:
            while (piece := await generation.next()) is not None:
                text, finish = piece
                body = chunk(text, finish)
                if finish is None:
                    message["body"] = body
                    await send(message)
                    continue
                if include_usage:
                    usage = self._usage(generation)
                    body += _event(s.ChatCompletionChunk(id=rid, created=created, model=model,
                                                         choices=[], usage=usage) if chat else
                                   s.Completion(id=rid, created=created, model=model,
                                                choices=[], usage=usage))
                await send({"type": "http.response.body", "body": body + _DONE})
                return
            await send({"type": "http.response.body", "body": _DONE})
        except APIError as error:
            await send({"type": "http.response.body",
                        "body": b"data: " + error.to_json() + b"\n\n" + _DONE})
