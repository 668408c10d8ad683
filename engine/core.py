"""EngineCore: the ZMQ loop around a backend (the mock or the real scheduler+model).

Three threads, as in vLLM's EngineCoreProc:

* the input thread owns the input DEALER, decodes ADD / ABORT / UTILITY frames and
  puts them on a queue;
* the busy loop (the caller's thread) drains that queue into the backend, runs one
  backend step while there is work, and hands the step's outputs on;
* the output thread owns the output PUSH and sends encoded EngineOutputs.

A backend exception in ``step`` is fatal: the dead sentinel goes out and the process
exits non-zero. Per-request failures are the backend's business (finish_reason
``error``), never the loop's.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Protocol

import zmq

from engine import protocol as p

logger = logging.getLogger("vrs.engine")


class EngineBackend(Protocol):
    """What the loop needs from an engine. The mock and the real engine implement it."""

    def add_request(self, request: p.EngineCoreRequest) -> list[p.EngineCoreOutput]:
        """Queue a request. Returns outputs to send at once (e.g. a refusal)."""
        ...

    def abort_requests(self, request_ids: list[str]) -> list[p.EngineCoreOutput]:
        """Drop requests; returns one ``abort`` output per request that was known."""
        ...

    def has_unfinished_requests(self) -> bool: ...

    def step(self) -> list[p.EngineCoreOutput]:
        """Run one scheduling step; returns the new tokens / finishes it produced."""
        ...

    def stats(self) -> p.SchedulerStats: ...

    def utility(self, method: str, args: list[Any]) -> Any:
        """Answer a UTILITY call; raise ValueError for an unknown method."""
        ...


_STOP = object()


class EngineCore:
    """Runs ``backend`` behind connected ``input_socket`` / ``output_socket``."""

    def __init__(
        self,
        backend: EngineBackend,
        engine_index: int,
        input_socket: zmq.Socket,
        output_socket: zmq.Socket,
    ) -> None:
        self.backend = backend
        self.engine_index = engine_index
        self._input = input_socket
        self._output = output_socket
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._outbox: queue.Queue[Any] = queue.Queue()
        self._input_done = threading.Event()

    # ---------------------------------------------------------------- threads

    def _input_loop(self) -> None:
        try:
            while not self._input_done.is_set():
                # Poll with a timeout so the thread notices the end of the busy loop and
                # stops using the socket before its owner closes it.
                if not self._input.poll(100):
                    continue
                frames = self._input.recv_multipart(copy=False)
                kind = p.RequestType(frames[0].bytes[0])
                body = frames[1].buffer
                if kind == p.RequestType.ADD:
                    self._inbox.put((kind, p.ADD_DECODER.decode(body)))
                elif kind == p.RequestType.ABORT:
                    self._inbox.put((kind, p.ABORT_DECODER.decode(body)))
                else:
                    self._inbox.put((kind, p.UTILITY_DECODER.decode(body)))
        except zmq.ContextTerminated:
            return
        except Exception as exc:  # malformed frame from the frontend: fatal by design
            logger.exception("engine %d: bad input frame", self.engine_index)
            self._inbox.put(exc)

    def _output_loop(self) -> None:
        while True:
            item = self._outbox.get()
            if item is _STOP:
                return
            try:
                self._output.send(item, copy=False)
            except zmq.ContextTerminated:
                return

    # ---------------------------------------------------------------- busy loop

    def _handle(self, item: Any) -> tuple[list[p.EngineCoreOutput], p.UtilityOutput | None]:
        if isinstance(item, Exception):
            raise item
        kind, msg = item
        if kind == p.RequestType.ADD:
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("engine %d: add %s", self.engine_index, msg.request_id)
            return self.backend.add_request(msg), None
        if kind == p.RequestType.ABORT:
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("engine %d: abort %s", self.engine_index, " ".join(msg.request_ids))
            return self.backend.abort_requests(msg.request_ids), None
        try:
            result = self.backend.utility(msg.method, list(msg.args))
            return [], p.UtilityOutput(call_id=msg.call_id, success=True, result=result)
        except Exception as exc:  # a failed utility call is the caller's answer
            return [], p.UtilityOutput(
                call_id=msg.call_id, success=False, error_message=f"{type(exc).__name__}: {exc}"
            )

    def _send(self, outputs: list[p.EngineCoreOutput], utility: p.UtilityOutput | None) -> None:
        message = p.EngineOutputs(
            engine_index=self.engine_index,
            outputs=outputs,
            timestamp=time.time(),
            scheduler_stats=self.backend.stats(),
            utility_output=utility,
        )
        self._outbox.put(p.encode(message))

    def run_busy_loop(self, stop: threading.Event | None = None) -> None:
        """Serve until ``stop`` is set. Raises whatever the backend raises."""
        stop = stop or threading.Event()
        self._input_done.clear()
        receiver = threading.Thread(target=self._input_loop, name="vrs-engine-input",
                                    daemon=True)
        receiver.start()
        sender = threading.Thread(target=self._output_loop, name="vrs-engine-output", daemon=True)
        sender.start()
        try:
            while not stop.is_set():
                # Block for input only while idle; otherwise drain what is there.
                pending: list[Any] = []
                if not self.backend.has_unfinished_requests():
                    try:
                        pending.append(self._inbox.get(timeout=0.1))
                    except queue.Empty:
                        continue
                while True:
                    try:
                        pending.append(self._inbox.get_nowait())
                    except queue.Empty:
                        break
                immediate: list[p.EngineCoreOutput] = []
                for item in pending:
                    outputs, utility = self._handle(item)
                    if utility is not None:
                        self._send(outputs, utility)
                    else:
                        immediate.extend(outputs)
                step_outputs = (
                    self.backend.step() if self.backend.has_unfinished_requests() else []
                )
                if immediate or step_outputs:
                    self._send(immediate + step_outputs, None)
        finally:
            self._input_done.set()
            receiver.join(timeout=5)
            self._outbox.put(_STOP)
            sender.join(timeout=5)

    def send_dead_sentinel(self) -> None:
        """Tell the frontend this engine is gone (best effort, bounded wait)."""
        try:
            self._output.send(p.ENGINE_DEAD_SENTINEL, flags=zmq.NOBLOCK)
        except zmq.ZMQError:
            logger.warning("engine %d: could not send the dead sentinel", self.engine_index)
