"""The frontend's side of the wire: an asyncio client for one or more engines.
Rust: the vrs-engine-client crate (rust/engine-client/src/lib.rs, client.rs, engines.rs).

The frontend binds both sockets (docs/internals.md, "The wire"): the input ROUTER, to
which every engine's DEALER connects (identity = engine index, 2 bytes LE), and the
output PULL, to which every engine's PUSH connects. Requests go out as
``[identity, type_byte, msgpack]``; a reader, called back when the output socket turns
readable, decodes ``EngineOutputs`` and hands each request's outputs to its
:class:`RequestStream`.
The client keeps the latest ``SchedulerStats`` per engine and notices an engine's death
two ways: the dead sentinel on the output socket, and the process exiting (a SIGKILLed
engine sends nothing).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

import zmq

from engine import protocol as p
from engine.process.launcher import Engines
from server.edge.error import APIError, ErrorKind, engine_dead
from server.engine_client.balance import least_loaded

logger = logging.getLogger("vrs.frontend")

_ADD = bytes([p.RequestType.ADD])
_ABORT = bytes([p.RequestType.ABORT])
_WATCH_INTERVAL_S = 0.2
DEFAULT_MAX_PENDING = 4096


class EngineConnectError(RuntimeError):
    """The engines did not connect to the input socket (exit, timeout, bad message)."""


class ClientDisconnected(Exception):
    """The HTTP client went away; the request's consumer should stop."""


def max_pending_outputs() -> int:
    """Engine outputs one request may have waiting for its consumer (a client that does
    not read): ``VRS_MAX_PENDING_OUTPUTS``, default 4096. Beyond it the request is
    aborted."""
    value = os.environ.get("VRS_MAX_PENDING_OUTPUTS", "")
    return int(value) if value.strip().isdigit() and int(value) > 0 else DEFAULT_MAX_PENDING


class RequestStream:
    """Outputs of one engine request, delivered in batches to its single consumer."""

    __slots__ = ("request_id", "identity", "_items", "_waiter", "_error")

    def __init__(self, request_id: str, identity: bytes) -> None:
        self.request_id = request_id
        self.identity = identity
        self._items: list[p.EngineCoreOutput] = []
        # The consumer's wake-up while it waits in get(): one future per wait, set once.
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None

    @classmethod
    def replay(cls, request_id: str, identity: bytes,
               outputs: list[p.EngineCoreOutput]) -> RequestStream:
        """A stream that holds ``outputs`` already (computed by the frontend, e.g. a beam
        search's sequences) and no engine request: the client never sees it."""
        stream = cls(request_id, identity)
        stream._items = list(outputs)
        return stream

    def put(self, output: p.EngineCoreOutput, limit: int) -> bool:
        """Queues ``output``; False when more than ``limit`` wait (the stream is then
        failed and its queue dropped)."""
        self._items.append(output)
        if self._waiter is not None:
            self._wake()
        if len(self._items) <= limit:
            return True
        self._items = []
        self.fail(APIError(ErrorKind.ENGINE_DEAD,
                           f"request {self.request_id} aborted: the client is not reading "
                           f"its response ({limit} engine outputs waiting)"))
        return False

    def fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> list[p.EngineCoreOutput]:
        """Every output that arrived since the last call (waits for at least one)."""
        while not self._items:
            if self._error is not None:
                raise self._error
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            await waiter
        items, self._items = self._items, []
        return items


class EngineClient:
    """Binds the input and output sockets and talks to the engines behind them."""

    def __init__(self, input_address: str, output_address: str) -> None:
        self._ctx = zmq.Context()
        # Sends go through a plain (synchronous) ROUTER: with no high-water mark they never
        # block, and ROUTER_MANDATORY turns a vanished engine into an error, not a drop.
        self._input = self._ctx.socket(zmq.ROUTER)
        self._input.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._input.setsockopt(zmq.SNDHWM, 0)
        self._input.setsockopt(zmq.LINGER, 0)
        self._input.bind(input_address)
        # A synchronous PULL too: the reader drains it from a callback on its file
        # descriptor, one wakeup per burst, no future or task switch per message.
        self._output = self._ctx.socket(zmq.PULL)
        self._output.setsockopt(zmq.RCVHWM, 0)
        self._output.setsockopt(zmq.LINGER, 0)
        self._output.bind(output_address)
        self.input_address = input_address
        self.output_address = output_address
        self._streams: dict[str, RequestStream] = {}
        self._load: dict[bytes, int] = {}  # requests in flight per engine identity
        self._turn = 0
        self.routed: dict[int, int] = {}  # requests routed to each engine index, in all
        self.stats: dict[int, p.SchedulerStats] = {}
        self.readies: dict[int, p.Ready] = {}
        self.dead_reason: str | None = None
        self._group: Engines | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._on_dead: Callable[[str], None] | None = None
        self.max_model_len = 0  # from READY (the smallest over the engines)
        self.vocab_size = 0
        self.eos_token_ids: frozenset[int] = frozenset()  # from READY (the first engine's)
        # From READY (the first engine's): what the model serves, "generate" or "pooling";
        # a pooling model's tasks and its classes' labels (server/routes/pooling/).
        self.runner = p.Runner.GENERATE.value
        self.pooling_tasks: tuple[str, ...] = ()
        self.classify_labels: tuple[str, ...] = ()
        self._max_pending = max_pending_outputs()

    # ------------------------------------------------------------------ startup

    def wait_engines(self, group: Engines, timeout_s: float) -> None:
        """Block until every engine of ``group`` (each that sent READY on the handshake) has
        sent READY on the input socket."""
        expected = {p.engine_identity(index) for index in group.readies}
        deadline = time.monotonic() + timeout_s
        while expected - set(self._load):
            gone = group.exited()
            if gone is not None:
                raise EngineConnectError(f"engine {gone[0]} exited with code {gone[1]} during "
                                         "startup")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineConnectError(f"engines did not connect to {self.input_address} "
                                         f"within {timeout_s:.0f} s (VRS_ENGINE_READY_TIMEOUT_S)")
            if not self._input.poll(int(min(remaining, 0.1) * 1000)):
                continue
            identity, kind, body = self._input.recv_multipart()
            if kind[0] != p.HandshakeKind.READY:
                raise EngineConnectError(f"expected READY on the input socket, got kind "
                                         f"{kind[0]:#x}")
            ready = p.READY_DECODER.decode(body)
            self.readies[ready.engine_index] = ready
            self.routed[ready.engine_index] = 0
            self._load[identity] = 0
        self._group = group
        self.max_model_len = min(ready.max_model_len for ready in self.readies.values())
        self.vocab_size = min(ready.vocab_size for ready in self.readies.values())
        first = self.readies[min(self.readies)]
        self.eos_token_ids = frozenset(first.eos_token_ids)
        self.runner = first.runner
        self.pooling_tasks = tuple(first.pooling_tasks)
        self.classify_labels = tuple(first.classify_labels)

    def start(self, on_dead: Callable[[str], None]) -> None:
        """Start the output reader and the engine watcher (call inside the event loop)."""
        self._on_dead = on_dead
        self._tasks = [asyncio.create_task(self._read_outputs(), name="vrs-output-reader"),
                       asyncio.create_task(self._watch_engines(), name="vrs-engine-watch"),
                       asyncio.create_task(self.log_stats(), name="vrs-stats-log")]

    @property
    def num_inflight(self) -> int:
        return len(self._streams)

    def engine_stats(self) -> dict[int, p.SchedulerStats]:
        """The latest stats of every engine (zeros until it has reported)."""
        return {index: self.stats.get(index, p.SchedulerStats()) for index in self.readies}

    async def log_stats(self, interval_s: float = 10.0) -> None:
        """Log the engines' load every ``interval_s`` while there is any (as vrs-rs does)."""
        was_idle = True
        while True:
            await asyncio.sleep(interval_s)
            stats = list(self.stats.values())
            running = sum(s.num_running for s in stats)
            waiting = sum(s.num_waiting for s in stats)
            idle = self.num_inflight == 0 and running == 0 and waiting == 0
            if not (idle and was_idle):
                usage = max((s.kv_cache_usage for s in stats), default=0.0)
                logger.info("engine: %d running, %d waiting, KV cache %.1f%% used, "
                            "%d preemptions; %d request(s) in flight", running, waiting,
                            usage * 100, sum(s.num_preemptions for s in stats),
                            self.num_inflight)
            was_idle = idle

    # ------------------------------------------------------------------ requests

    def add(self, request: p.EngineCoreRequest) -> RequestStream:
        """Send ADD to the least loaded engine; the returned stream yields its outputs."""
        if self.dead_reason is not None:
            raise engine_dead(self.dead_reason)
        identity = least_loaded(self._load, self.stats, self._turn)
        self._turn += 1
        stream = RequestStream(request.request_id, identity)
        try:
            self._input.send_multipart([identity, _ADD, p.encode(request)], flags=zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            self._die(f"cannot send to the engine: {exc}")
            raise engine_dead(self.dead_reason or str(exc)) from exc
        self._streams[request.request_id] = stream
        self._load[identity] += 1
        index = int.from_bytes(identity, "little")
        self.routed[index] = self.routed.get(index, 0) + 1
        return stream

    def abort(self, stream: RequestStream) -> None:
        """Stop a request the consumer no longer wants (stop string, client gone)."""
        if self._streams.pop(stream.request_id, None) is None:
            return
        self._load[stream.identity] -= 1
        if self.dead_reason is not None:
            return
        logger.debug("aborting %s", stream.request_id)
        body = p.encode(p.AbortRequests([stream.request_id]))
        try:
            self._input.send_multipart([stream.identity, _ABORT, body], flags=zmq.NOBLOCK)
        except zmq.ZMQError as exc:
            logger.warning("could not abort %s: %s", stream.request_id, exc)

    # ------------------------------------------------------------------ background

    async def _read_outputs(self) -> None:
        """Delivers every message as the socket's descriptor turns readable, until the
        engine is dead. ZMQ's descriptor is edge-triggered: each wakeup drains the socket
        until it would block, which also re-arms it."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        sock = self._output
        fd = sock.getsockopt(zmq.FD)
        assert isinstance(fd, int)  # ZMQ_FD is an int option (a descriptor) on POSIX

        def drain() -> None:
            if ended.done():
                return
            try:
                while True:
                    try:
                        frame = sock.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        return
                    if not self._dispatch(frame):
                        ended.set_result(None)
                        return
            except Exception as exc:  # noqa: BLE001 - the reader's failure ends it, as a task's
                ended.set_exception(exc)

        loop.add_reader(fd, drain)
        try:
            drain()  # what arrived before the descriptor was watched
            await ended
        finally:
            loop.remove_reader(fd)

    def _dispatch(self, frame: bytes) -> bool:
        """Hand one output message to its requests; False once the engine is dead."""
        if frame == p.ENGINE_DEAD_SENTINEL:
            self._die("the engine reported a fatal error and stopped")
            return False
        try:
            message = p.OUTPUTS_DECODER.decode(frame)
        except Exception as exc:  # noqa: BLE001 - a garbled wire is fatal, say why
            self._die(f"undecodable message from the engine: {exc}")
            return False
        if message.scheduler_stats is not None:
            self.stats[message.engine_index] = message.scheduler_stats
        streams = self._streams
        limit = self._max_pending
        for output in message.outputs:
            stream = streams.get(output.request_id)
            if stream is None:  # aborted by us, or finished already
                continue
            if not stream.put(output, limit):
                logger.warning("%s: the client stopped reading; aborting", stream.request_id)
                self.abort(stream)
            elif output.finish_reason is not None:
                del streams[output.request_id]
                self._load[stream.identity] -= 1
        return True

    async def _watch_engines(self) -> None:
        assert self._group is not None
        while True:
            await asyncio.sleep(_WATCH_INTERVAL_S)
            gone = self._group.exited()
            if gone is not None:
                self._die(f"the engine process exited unexpectedly (engine {gone[0]}, exit code "
                          f"{gone[1]})")
                return

    def _die(self, reason: str) -> None:
        if self.dead_reason is not None:
            return
        self.dead_reason = reason
        logger.error("engine failure: %s", reason)
        error: APIError = engine_dead(reason)
        for stream in self._streams.values():
            stream.fail(error)
        self._streams.clear()
        if self._on_dead is not None:
            self._on_dead(reason)

    def cut_off(self, reason: str) -> None:
        """Fail every open request with ``reason`` (503), e.g. when shutting down; new
        requests are still taken (the server has stopped accepting them anyway)."""
        if self._streams:
            logger.warning("%s: ending %d unfinished request(s)", reason, len(self._streams))
        error: APIError = engine_dead(reason)
        for stream in self._streams.values():
            stream.fail(error)
            self._load[stream.identity] -= 1
        self._streams.clear()

    async def stop(self) -> None:
        """Stop the background tasks (before the engines are stopped on purpose)."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - shutting down
                pass
        self._tasks = []

    def close(self) -> None:
        self._input.close(linger=0)
        self._output.close(linger=0)
        self._ctx.term()
