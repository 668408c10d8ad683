"""Dispatch of a pooling request, shared by every pooling route: the runner check,
admission, the body, the prompts the route makes of it, then one engine request per prompt
(ids ``<prefix>-<32 hex>``, ``-<i>`` appended when there are several; the client's id with
request ids on: server/edge/request_id.py), all sent at once and awaited together, each
entered in the queue first (server/edge/queue.py), counted in /metrics and the request's
trace; then the route's response. An engine refusal (invalid_request) is a 400, another
engine error a 500; the client going away or an error aborts the engine requests not yet
answered. Rust: rust/server/src/routes/pooling/dispatch.rs. Behaviour: docs/api.md,
"Pooling routes".
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import msgspec

from engine import protocol as p
from server.dispatch import disconnected
from server.edge import Receive, Send, send_json, trace
from server.edge import request_id as request_ids
from server.edge.error import APIError, ErrorKind
from server.edge.metrics import Rejection
from server.edge.queue import Ticket
from server.engine_client import ClientDisconnected, RequestStream
from server.output.response import timeout_error
from server.routes.pooling.request import runner_error
from server.state import State

if TYPE_CHECKING:
    from server.edge.trace import RequestTrace

logger = logging.getLogger("vrs.frontend")

_INVALID = p.ErrorKind.INVALID_REQUEST.value
# A pooling request's sampling params: sent because the wire carries them, not used.
_UNUSED_SAMPLING = p.SamplingParams(max_tokens=1)


class Batch(msgspec.Struct):
    """What a route sends: its prompts' token ids, each one's pooling params, and the
    request's scheduling fields."""

    prompts: list[list[int]]
    params: list[p.PoolingParams]
    priority: int = 0
    cache_salt: str | None = None


class Pooled(msgspec.Struct):
    """The engine's answers, in prompt order, and what the response names."""

    outputs: list[list[float]]
    prompt_tokens: int  # every prompt's tokens
    request_id: str  # the public id, ``<prefix>-<id>``
    created: int  # unix seconds


# A route's work: the body to its batch, and the response body it makes of the answers.
Prepare = Callable[[bytes], Awaitable[tuple[Batch, Callable[[Pooled], bytes]]]]


async def pool(state: State, receive: Receive, send: Send, prefix: str,
               prepare: Prepare) -> None:
    """One pooling request, as the module doc says; the response is the route's JSON."""
    runner_error(state)
    arrival = time.perf_counter()
    traced = trace.begin()
    state.admission.admit()
    try:
        body = await state.body(receive)
        batch, respond = await prepare(body)
        rid, engine_rid = request_ids.engine_id(prefix)
        logger.debug("accepted request_id=%s engine_request_id=%s prompts=%d "
                     "prompt_tokens=%d", rid, engine_rid, len(batch.prompts),
                     sum(len(ids) for ids in batch.prompts))
        try:
            outputs = await _run(state, receive, engine_rid, batch, arrival, traced)
        except ClientDisconnected:
            logger.debug("%s: the client went away", rid)
            return
        pooled = Pooled(outputs, sum(len(ids) for ids in batch.prompts), rid,
                        int(time.time()))
        await send_json(send, 200, respond(pooled))
    finally:
        state.admission.release()


async def _run(state: State, receive: Receive, rid: str, batch: Batch, arrival: float,
               traced: RequestTrace | None) -> list[list[float]]:
    """The engine's answer to each prompt, the requests sent at once; raises
    ClientDisconnected when the client went away first, 504 past --request-timeout."""
    lengths = [len(ids) for ids in batch.prompts]
    try:
        tickets = state.queue.enter(lengths)
    except APIError as error:
        if error.rejection is not None:
            state.metrics.reject(error.rejection)
        raise
    client = state.client
    streams: list[RequestStream] = []
    try:
        for index, (ids, params) in enumerate(zip(batch.prompts, batch.params, strict=True)):
            request_id = rid if len(batch.prompts) == 1 else f"{rid}-{index}"
            streams.append(client.add(p.EngineCoreRequest(
                request_id, ids, _UNUSED_SAMPLING, time.time(), batch.priority,
                batch.cache_salt, pooling_params=params)))
            state.metrics.tokens(prompt=len(ids))
        if traced is not None:
            traced.queued(rid, lengths)
        answers = [asyncio.ensure_future(
            _answer(state, stream, ticket, arrival, len(ids), traced, index))
            for index, (stream, ticket, ids) in enumerate(
                zip(streams, tickets, batch.prompts, strict=True))]
        work: asyncio.Future[list[list[float]]] = asyncio.gather(*answers)
        gone: asyncio.Future[None] = asyncio.ensure_future(disconnected(receive))
        timeout = state.options.request_timeout
        try:
            waiting: set[asyncio.Future[Any]] = {work, gone}
            done, _ = await asyncio.wait(waiting, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            # One failed, the client went away, or the deadline passed: the other answers
            # are not waited for (their engine requests are aborted below).
            for answer in answers:
                answer.cancel()
            await asyncio.gather(*answers, return_exceptions=True)
        if work in done:
            return work.result()
        if gone in done:
            raise ClientDisconnected
        raise timeout_error(timeout or 0.0)
    finally:
        for stream in streams:
            client.abort(stream)  # those not answered (a no-op for the others)
        for ticket in tickets:
            if ticket is not None:
                ticket.leave()


async def _answer(state: State, stream: RequestStream, ticket: Ticket | None,
                  arrival: float, prompt_tokens: int, traced: RequestTrace | None,
                  index: int) -> list[float]:
    """One engine request's answer (its ticket left at its first output)."""
    engine = int.from_bytes(stream.identity, "little")
    reason = "abort"
    try:
        while True:
            outputs = await _outputs(state, stream, ticket)
            if ticket is not None:
                ticket.leave()
                ticket = None
            for output in outputs:
                if traced is not None:
                    traced.output(index, output)
                if output.finish_reason is None:
                    continue
                reason = output.finish_reason
                if reason == p.FinishReason.ERROR.value:
                    message = output.error_message or "the engine failed this request"
                    kind = (ErrorKind.BAD_REQUEST if output.error_kind == _INVALID
                            else ErrorKind.INTERNAL)
                    raise APIError(kind, message)
                if output.pooling_output is None:
                    raise APIError(ErrorKind.INTERNAL, f"the engine ended {stream.request_id} "
                                   f"({reason}) without a pooling output")
                ended = time.perf_counter() - arrival
                state.metrics.e2e.observe(ended)
                state.metrics.vllm.first_token(engine, prompt_tokens, ended)
                state.metrics.vllm.finished(engine, reason, ended, None, prompt_tokens, 0,
                                            output.queue_time, output.prefill_time)
                return output.pooling_output
    finally:
        if traced is not None:
            traced.finished(reason, 0)


async def _outputs(state: State, stream: RequestStream,
                   ticket: Ticket | None) -> list[p.EngineCoreOutput]:
    """The stream's next outputs; a queued request waits until its ticket's deadline."""
    if ticket is None or ticket.deadline is None:
        return await stream.get()
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout_at(loop.time() + max(0.0, ticket.deadline - time.monotonic())):
            return await stream.get()
    except TimeoutError:
        state.metrics.reject(Rejection.QUEUE_WAIT_TIMEOUT)
        raise ticket.timeout_error() from None
