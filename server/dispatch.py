"""Dispatch of a generation request (chat, completions, and the Responses and Messages
APIs on the chat pipeline): admission, the body, the prompts; then the engine requests
and the response, streamed or whole. Rust: rust/server/src/dispatch.rs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from engine import protocol as p
from server.edge import Receive, Send, send_json, trace
from server.edge import request_id as request_ids
from server.edge.error import bad_request
from server.engine_client import ClientDisconnected
from server.output import batch, beam_search, response
from server.output.generation import Generation
from server.parsers.reasoning import markers_of
from server.state import State
from server.validate.params import Settings
from server.validate.prompt import Prompt

logger = logging.getLogger("vrs.frontend")

# What a generation route makes of its body: its prompts (one, but for a batched
# completions request).
Build = Callable[[bytes], Awaitable[list[Prompt]]]
# The response shapes for the prompts and the request id (``PREFIX-<32 hex>``).
ShapesOf = Callable[[list[Prompt], str], response.Shapes]


# The routes of each pooling task, for the 400 of a generation request to a pooling model.
_TASK_ROUTES = {"embed": ("/v1/embeddings", "/pooling", "/score", "/rerank"),
                "classify": ("/classify", "/pooling"), "score": ("/score", "/rerank")}


def generation_error(state: State) -> None:
    """The 400 of a generation route on a pooling model (server/routes/pooling/)."""
    if state.client.runner == p.Runner.POOLING.value:
        tasks = state.client.pooling_tasks
        routes = sorted({r for task in tasks for r in _TASK_ROUTES.get(task, ())})
        raise bad_request(f"this model serves pooling requests: {', '.join(tasks)} (use "
                          f"{', '.join(routes)}); it does not generate text")


async def disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _watch_disconnect(receive: Receive, generations: list[Generation]) -> None:
    await disconnected(receive)
    for generation in generations:
        generation.cancel()


async def generate(state: State, receive: Receive, send: Send, build: Build,
                   shapes_of: ShapesOf, id_prefix: str | Callable[[], str]) -> None:
    """A generation request on the chat / completions pipeline (also the Responses
    and Messages APIs'): admission, the body, the prompts ``build`` makes of it, the
    engine requests (ids ``<id_prefix>-<32 hex>``, or the client's id with request ids
    on: ``server/edge/request_id.py``; a callable prefix is asked once the prompts are
    built), then the answer in the shapes ``shapes_of`` makes.
    Errors before the response starts propagate to the dispatcher (in the path's
    dialect); later ones take the shapes' dialect."""
    generation_error(state)
    arrival = time.perf_counter()
    # The request's span (when traces are on) starts now: a refused request has one too.
    traced = trace.begin()
    timeout = state.options.request_timeout
    deadline = None if timeout is None else time.monotonic() + timeout
    state.admission.admit()
    try:
        body = await state.body(receive)
        prompts = await build(body)
        prefix = id_prefix if isinstance(id_prefix, str) else id_prefix()
        rid, engine_rid = request_ids.engine_id(prefix)
        searched = None
        if prompts[0].settings.beam_search is not None:
            searched = await _search(state, receive, engine_rid, prompts, deadline,
                                     timeout or 0.0)
            if searched is None:
                logger.debug("%s: the client went away during its beam search", rid)
                return
        generations = batch.fan_out(
            state.client, state.text, state.metrics, engine_rid, prompts, arrival, state.queue,
            traced, markers_of(state.options.reasoning_parser) is not None, searched)
        if traced is not None:
            traced.queued(rid, (len(prompt.ids) for prompt in prompts))
        settings = prompts[0].settings
        logger.debug("accepted request_id=%s engine_request_id=%s prompts=%d "
                     "prompt_tokens=%d n=%d stream=%s", rid, engine_rid, len(prompts),
                     sum(len(p.ids) for p in prompts), settings.n, settings.stream)
        shapes = shapes_of(prompts, rid)
        await _run(state, receive, send, generations, shapes, prompts[0].settings,
                   deadline, timeout or 0.0)
    finally:
        state.admission.release()


async def _search(state: State, receive: Receive, rid: str, prompts: list[Prompt],
                  deadline: float | None, timeout: float) -> list[beam_search.Searched] | None:
    """The prompts' beam searches (``server/output/beam_search.py``) within the request's
    deadline (504 past it); None when the client went away first. Either way a search
    still running is cancelled, which aborts its engine requests."""
    search = asyncio.ensure_future(beam_search.run(
        state.client, state.queue, state.metrics, rid, prompts, state.client.eos_token_ids))
    gone = asyncio.ensure_future(disconnected(receive))
    wait = None if deadline is None else max(0.0, deadline - time.monotonic())
    try:
        done, _ = await asyncio.wait({search, gone}, timeout=wait,
                                     return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        search.cancel()
    if search in done:
        return search.result()
    if gone in done:
        return None
    raise response.timeout_error(timeout)


async def _run(state: State, receive: Receive, send: Send, generations: list[Generation],
               shapes: response.Shapes, settings: Settings, deadline: float | None,
               timeout: float) -> None:
    watcher = asyncio.ensure_future(_watch_disconnect(receive, generations))
    try:
        if settings.stream:
            await response.stream(send, generations, shapes, settings.include_usage,
                                  deadline, timeout, settings.constraint is not None,
                                  state.options.sse_keep_alive_interval)
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
