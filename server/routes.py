"""The OpenAI-compatible HTTP routes, as a plain ASGI application (served by uvicorn).

Routes: ``POST /v1/chat/completions``, ``POST /v1/completions`` (JSON, or SSE when
``stream`` is true), ``GET /v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus
text), ``GET /load`` (``{"server_load": n}``: generation requests in flight), ``GET
/version``, ``POST /tokenize``, ``POST /detokenize``, and vLLM's SageMaker pair: ``GET|POST
/ping`` (as ``/health``) and ``POST /invocations`` (chat or completions, by the body:
``server/invocations.py``), OpenAI's Responses API (``POST /v1/responses``, stateless, on
the chat pipeline, and 404s for the stored-response routes: ``server/responses/``),
Anthropic's ``POST /v1/messages`` and ``POST /v1/messages/count_tokens``
(``server/messages/``); anything else is a JSON 404, a known path with the wrong method a
JSON 405 with ``Allow`` (a route that takes GET takes HEAD too, as axum's:
``GET,HEAD,POST`` on ``/ping``). Same shapes, statuses and check order as the Rust server
(``rust/server/src/routes.rs``, ``routes/chat_completions.rs``, ``routes/completions.rs``,
``routes/invocations.rs``, ``output/response.rs``):

API key (401 on ``/v1/*`` and ``/invocations``, when the server has one) -> admission (429
with Retry-After when ``max_concurrent_requests`` generation requests are in flight) -> body
(413 over ``max_request_body``) -> (``/invocations``: the endpoint, 400 when the body names
neither) -> JSON, keys, types, values (400) -> model (404) ->
messages / prompt -> template + tokenization, off the event loop (400 on a template
error) -> context length (400) -> the queue (503 with Retry-After when full:
``server/queue.py``) -> engine (503 when it is dead). ``n`` choices are ``n``
engine requests, for each prompt of a batched completions request (``server/batch.py``).
A client that disconnects aborts its engine requests; the deadline (``request_timeout``)
aborts them with 504 or an SSE error event.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor

import msgspec

from engine.version import __version__
from server import batch, messages, request_id, response, responses, tokenize, trace
from server import openai as s
from server.choice import ChatChoice, CompletionChoice
from server.edge import (
    MAX_BODY_BYTES,
    Handler,
    Receive,
    Routes,
    Scope,
    Send,
    dispatch,
    model_list,
    read_body,
    send_json,
)
from server.engine_client import ClientDisconnected, EngineClient
from server.error import (
    LIMIT_FLAG,
    RETRY_AFTER,
    APIError,
    ErrorKind,
    engine_dead,
    model_not_found,
)
from server.generation import Generation
from server.invocations import is_chat
from server.logprobs import TokenTexts
from server.metrics import CONTENT_TYPE, Metrics, Rejection
from server.params import Settings
from server.parsers.reasoning import markers_of
from server.prompt import Prompt, PromptBuilder
from server.queue import Queue
from server.text import ModelText
from server.trace import Traces

logger = logging.getLogger("vrs.frontend")

__all__ = ["App", "Handler", "Options", "Receive", "Scope", "Send"]

_encode = msgspec.json.Encoder().encode
# What a generation route makes of its body: its prompts (one, but for a batched
# completions request).
Build = Callable[[bytes], Awaitable[list[Prompt]]]
# The response shapes for the prompts and the request id (``PREFIX-<32 hex>``).
ShapesOf = Callable[[list[Prompt], str], response.Shapes]


async def _watch_disconnect(receive: Receive, generations: list[Generation]) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    for generation in generations:
        generation.cancel()


class Options(msgspec.Struct, kw_only=True):
    """Server settings the routes use (see ``server.Config``)."""

    api_key: str | None = None
    max_request_body: int = MAX_BODY_BYTES
    max_concurrent_requests: int | None = None
    request_timeout: float | None = None
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    max_batch_prompts: int = batch.DEFAULT_MAX_BATCH_PROMPTS
    sse_keep_alive_interval: float | None = None  # seconds; None: no comment frames
    max_num_queued_reqs: int | None = None
    max_num_queued_tokens: int | None = None
    max_queue_wait: float | None = None  # seconds
    otlp_traces_endpoint: str | None = None
    collect_detailed_traces: bool = False
    enable_request_id_headers: bool = False


class App:
    """The ASGI callable; ``client`` must be started before requests arrive."""

    def __init__(self, client: EngineClient, text: ModelText, served_model_name: str,
                 model_root: str, executor: Executor, options: Options | None = None,
                 traces: Traces | None = None) -> None:
        self.client = client
        self.traces = traces  # a span per generation request when on
        self.text = text
        self.model_name = served_model_name
        self.model_root = model_root
        self.options = options or Options()
        self.metrics = Metrics()
        self.prompts = PromptBuilder(text, served_model_name, client, executor,
                                     tool_parser=self.options.tool_call_parser,
                                     reasoning_parser=self.options.reasoning_parser,
                                     tokenize_latency=self.metrics.tokenize,
                                     max_batch_prompts=self.options.max_batch_prompts)
        self.executor = executor
        self.token_texts = TokenTexts(text.backend)
        self.created = int(time.time())
        self.active = 0  # generation requests in flight (admission, /load)
        options = self.options
        # Engine requests waiting for their first output (server/queue.py).
        self.queue = Queue(options.max_num_queued_reqs, options.max_num_queued_tokens,
                           options.max_queue_wait)
        key = self.options.api_key
        self._api_key = key.encode() if key else None
        self._routes: Routes = {
            "/v1/chat/completions": ("POST", self.chat_completions),
            "/v1/completions": ("POST", self.completions),
            "/v1/models": ("GET", self.models),
            "/health": ("GET", self.health),
            "/metrics": ("GET", self.metrics_route),
            "/load": ("GET", self.load),
            "/version": ("GET", self.version),
            "/ping": (("GET", "POST"), self.health),
            "/invocations": ("POST", self.invocations),
            "/tokenize": ("POST", self.tokenize),
            "/detokenize": ("POST", self.detokenize),
            "/v1/responses": ("POST", functools.partial(responses.create, self)),
            responses.PREFIX: (("GET", "POST", "DELETE"), responses.stored),
            "/v1/messages": ("POST", functools.partial(messages.messages, self)),
            "/v1/messages/count_tokens": ("POST", functools.partial(messages.count_tokens, self)),
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.traces is not None and scope["type"] == "http":
            await self.traces.handle(scope, receive, send, self._dispatch)
        else:
            await self._dispatch(scope, receive, send)

    async def _dispatch(self, scope: Scope, receive: Receive, send: Send) -> None:
        await dispatch(self._routes, scope, receive, send, self._api_key, self.metrics)

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

    async def metrics_route(self, scope: Scope, receive: Receive, send: Send) -> None:
        stats = self.client.engine_stats()
        vllm: list[str] = []
        self.metrics.vllm.render(vllm, self.model_name, self.client.max_model_len, stats)
        body = self.metrics.render(stats, self.active, self.client.routed) + "".join(vllm).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", CONTENT_TYPE),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def load(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, _encode({"server_load": self.active}))

    async def version(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send_json(send, 200, _encode({"version": __version__}))

    # ------------------------------------------------------------------ tokenizer routes

    def _check_model(self, model: str | None) -> None:
        if model is not None and model != self.model_name:
            raise model_not_found(model)

    async def tokenize(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await self._body(receive)
        request = tokenize.tokenize_request(body)
        self._check_model(request.model)
        if isinstance(request, tokenize.TokenizeChat):
            kwargs = tokenize.chat_input(request, self.text.has_chat_template)
            special = bool(request.add_special_tokens)
            text = await self.prompts.off_loop(self.text.render_chat, **kwargs)
        else:
            if request.prompt is None:
                raise APIError(ErrorKind.BAD_REQUEST, "`prompt` is required", "prompt")
            special = request.add_special_tokens is not False
            text = request.prompt
        ids = await self.prompts.off_loop(self.text.encode, text, special)
        strs = None
        if request.return_token_strs:
            backend = self.text.backend
            strs = [backend.id_to_token(i) or "" for i in ids]
        await send_json(send, 200, _encode(s.Tokenized(len(ids), self.client.max_model_len,
                                                       ids, strs)))

    async def detokenize(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await self._body(receive)
        request = tokenize.detokenize_request(body, self.client.vocab_size)
        self._check_model(request.model)
        text = await self.prompts.off_loop(self.text.decode, request.tokens or [], False)
        await send_json(send, 200, _encode(s.Detokenized(text)))

    # ------------------------------------------------------------------ generation

    def _admit(self) -> None:
        limit = self.options.max_concurrent_requests
        if limit is not None and self.active >= limit:
            self.metrics.reject(Rejection.MAX_CONCURRENT_REQUESTS)
            raise APIError(ErrorKind.TOO_MANY_REQUESTS,
                           f"the server is at its limit of {limit} concurrent requests; "
                           "retry later", headers=[RETRY_AFTER])

    async def chat_completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._generate(receive, send, chat=True)

    async def completions(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._generate(receive, send, chat=False)

    async def invocations(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._generate(receive, send, chat=None)

    def _body(self, receive: Receive) -> Awaitable[bytes]:
        return read_body(receive, self.options.max_request_body, LIMIT_FLAG)

    async def _generate(self, receive: Receive, send: Send, chat: bool | None) -> None:
        """A chat or completions request; ``chat`` None: the body decides
        (``/invocations``)."""
        kind = [chat]

        async def build(body: bytes) -> list[Prompt]:
            if kind[0] is None:
                kind[0] = is_chat(body)
            if kind[0]:
                return [await self.prompts.chat(body)]
            return await self.prompts.completion(body)

        def shapes_of(prompts: list[Prompt], rid: str) -> response.Shapes:
            return self._shapes(prompts, rid, bool(kind[0]))

        await self.generate(receive, send, build, shapes_of,
                            lambda: "chatcmpl" if kind[0] else "cmpl")

    async def generate(self, receive: Receive, send: Send, build: Build,
                       shapes_of: ShapesOf, id_prefix: str | Callable[[], str]) -> None:
        """A generation request on the chat / completions pipeline (also the Responses
        and Messages APIs'): admission, the body, the prompts ``build`` makes of it, the
        engine requests (ids ``<id_prefix>-<32 hex>``, or the client's id with request ids
        on: ``server/request_id.py``; a callable prefix is asked once the prompts are
        built), then the answer in the shapes ``shapes_of`` makes.
        Errors before the response starts propagate to the dispatcher (in the path's
        dialect); later ones take the shapes' dialect."""
        arrival = time.perf_counter()
        # The request's span (when traces are on) starts now: a refused request has one too.
        traced = trace.begin()
        timeout = self.options.request_timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        self._admit()
        self.active += 1
        try:
            body = await self._body(receive)
            prompts = await build(body)
            prefix = id_prefix if isinstance(id_prefix, str) else id_prefix()
            rid, engine_rid = request_id.engine_id(prefix)
            generations = batch.fan_out(
                self.client, self.text, self.metrics, engine_rid, prompts, arrival, self.queue,
                traced, markers_of(self.options.reasoning_parser) is not None)
            if traced is not None:
                traced.queued(rid, (len(prompt.ids) for prompt in prompts))
            settings = prompts[0].settings
            logger.debug("accepted request_id=%s engine_request_id=%s prompts=%d "
                         "prompt_tokens=%d n=%d stream=%s", rid, engine_rid, len(prompts),
                         sum(len(p.ids) for p in prompts), settings.n, settings.stream)
            shapes = shapes_of(prompts, rid)
            await self._run(receive, send, generations, shapes, prompts[0].settings,
                            deadline, timeout or 0.0)
        finally:
            self.active -= 1

    def _shapes(self, prompts: list[Prompt], rid: str, chat: bool) -> response.Shapes:
        settings = prompts[0].settings
        created = int(time.time())
        top = settings.sampling.logprobs
        continuous = settings.continuous_usage
        if chat:
            prompt = prompts[0]
            assert prompt.chat is not None
            reasoning = markers_of(self.options.reasoning_parser)
            return response.ChatShapes(rid, created, self.model_name, [
                ChatChoice(i, prompt.chat, reasoning, top, self.token_texts)
                for i in range(settings.n)], len(prompt.ids), continuous,
                settings.prompt_logprobs, self.token_texts)
        choices = []
        lengths = []
        for prompt in prompts:
            echo = None
            if settings.echo:
                echo = prompt.text if prompt.text is not None else self.text.decode(
                    prompt.ids, settings.skip_special_tokens)
            for _ in range(settings.n):
                choices.append(CompletionChoice(
                    len(choices), echo, top, self.token_texts, prompt_ids=prompt.ids,
                    echo_logprobs=settings.echo_logprobs is not None,
                    prompt_logprobs=settings.prompt_logprobs))
                lengths.append(len(prompt.ids))
        return response.CompletionShapes(rid, created, self.model_name, choices, lengths,
                                         settings.n, continuous)

    async def _run(self, receive: Receive, send: Send, generations: list[Generation],
                   shapes: response.Shapes, settings: Settings, deadline: float | None,
                   timeout: float) -> None:
        watcher = asyncio.ensure_future(_watch_disconnect(receive, generations))
        try:
            if settings.stream:
                await response.stream(send, generations, shapes, settings.include_usage,
                                      deadline, timeout, settings.constraint is not None,
                                      self.options.sse_keep_alive_interval)
            else:
                status, body, headers = await response.whole(generations, shapes, deadline,
                                                             timeout)
                await send_json(send, status, body, headers)
        except ClientDisconnected:
            logger.debug("%s: the client went away", generations[0].request_id)
        finally:
            watcher.cancel()
            for generation in generations:
                generation.close()

