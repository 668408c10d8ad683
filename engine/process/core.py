"""EngineCore: the ZMQ loop around a backend (the mock or the real scheduler+model).

Three threads, as in vLLM's EngineCoreProc:

* the input thread owns the input DEALER, decodes ADD / ABORT / UTILITY frames and
  puts them on a queue;
* the busy loop (the caller's thread) drains that queue into the backend, runs one
  backend step while there is work, and hands the step's outputs on;
* the output thread owns the output PUSH; it encodes and sends the steps' outputs,
  coalescing the steps that wait for it into one message (engine/process/coalesce.py).

A backend exception in ``step`` is fatal: the dead sentinel goes out and the process
exits non-zero. Per-request failures are the backend's business (finish_reason
``error``), never the loop's.

A request's ``extra_args`` (vLLM's: its ``vllm_xargs``, and ``kv_transfer_params``) reach
no logits processor: vrs has only built-in ones, and none reads them (vLLM without a
custom processor ignores them too). ``kv_transfer_params`` needs a KV connector, which
neither backend has: as vLLM without one, the request is served normally and a warning
is logged.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any, Protocol

import zmq

from engine import protocol as p
from engine.process.coalesce import StepResult, coalesce

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

    def close(self) -> None:
        """Stop what the backend runs beside this process (tensor-parallel workers)."""
        ...


_STOP = object()


class EngineCore:
    """Runs ``backend`` behind connected ``input_socket`` / ``output_socket``."""

    def __init__(
        self,
        backend: EngineBackend,
        engine_index: int,
        input_socket: zmq.Socket[bytes],
        output_socket: zmq.Socket[bytes],
    ) -> None:
        self.backend = backend
        self.engine_index = engine_index
        self._input = input_socket
        self._output = output_socket
        self._inbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
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
            steps = [self._outbox.get()]
            while True:  # everything made while the last message was going out
                try:
                    steps.append(self._outbox.get_nowait())
                except queue.Empty:
                    break
            stop = steps[-1] is _STOP
            if stop:
                steps.pop()
            try:
                for message in coalesce(steps, self.engine_index):
                    self._output.send(p.encode(message), copy=False)
            except zmq.ContextTerminated:
                return
            except Exception as exc:  # e.g. a utility result msgpack cannot carry
                # Fatal, as a failed step is: the busy loop raises it, the frontend is told.
                logger.exception("engine %d: cannot send outputs", self.engine_index)
                self._inbox.put(exc)
                return
            if stop:
                return

    # ---------------------------------------------------------------- busy loop

    def _handle(self, item: Any) -> tuple[list[p.EngineCoreOutput], p.UtilityOutput | None]:
        if isinstance(item, Exception):
            raise item
        kind, msg = item
        if kind == p.RequestType.ADD:
            if logger.isEnabledFor(logging.DEBUG):
                logger.debug("engine %d: add %s", self.engine_index, msg.request_id)
            extra = msg.sampling_params.extra_args
            if extra is not None and extra.get("kv_transfer_params") is not None:
                logger.warning("engine %d: request %s: Got kv_transfer_params, but no "
                               "KVConnector found. Disabling KVTransfer for this request.",
                               self.engine_index, msg.request_id)
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

    def _take(self, item: Any) -> list[p.EngineCoreOutput]:
        """Apply ``item`` and every other input waiting; utility answers go out at once,
        the other outputs (refusals, aborts) are returned to go out with this step's."""
        immediate: list[p.EngineCoreOutput] = []
        while True:
            outputs, utility = self._handle(item)
            if utility is not None:
                self._send(outputs, utility)
            else:
                immediate.extend(outputs)
            if self._inbox.empty():
                return immediate
            item = self._inbox.get_nowait()

    def _send(self, outputs: list[p.EngineCoreOutput], utility: p.UtilityOutput | None) -> None:
        # Handed over, never touched again here: the output thread may merge them.
        self._outbox.put(StepResult(outputs, self.backend.stats(), time.time(), utility))

    def run_busy_loop(self, stop: threading.Event | None = None) -> None:
        """Serve until ``stop`` is set. Raises whatever the backend raises."""
        stop = stop or threading.Event()
        self._input_done.clear()
        receiver = threading.Thread(target=self._input_loop, name="vrs-engine-input",
                                    daemon=True)
        receiver.start()
        sender = threading.Thread(target=self._output_loop, name="vrs-engine-output", daemon=True)
        sender.start()
        backend, inbox = self.backend, self._inbox
        try:
            while not stop.is_set():
                # Block for input only while idle; otherwise take what is there.
                if not backend.has_unfinished_requests():
                    try:
                        outputs = self._take(inbox.get(timeout=0.1))
                    except queue.Empty:
                        continue
                elif not inbox.empty():
                    outputs = self._take(inbox.get_nowait())
                else:
                    outputs = []
                if backend.has_unfinished_requests():
                    step_outputs = backend.step()
                    outputs = outputs + step_outputs if outputs else step_outputs
                if outputs:
                    self._send(outputs, None)
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
