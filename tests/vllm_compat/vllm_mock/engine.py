"""One mock engine identity: its input and output sockets and the paced step loop.

Like ``EngineCoreProc`` it reads ADD / ABORT / START_DP_WAVE / UTILITY frames from its
input DEALERs (ADD decoded with ``MsgpackDecoder(EngineCoreRequest)``, aux frames
included), and writes ``EngineCoreOutputs`` with ``MsgpackEncoder`` to the output PUSH of
the request's ``client_index``. Prefill is instant: a new request's first token comes in
the next step. Each step gives every running request ``chunk_size`` tokens, batched per
client, with ``SchedulerStats``. Death: ``ENGINE_CORE_DEAD`` on every output socket.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import zmq
from vllm.v1.engine import (
    EngineCoreOutput,
    EngineCoreOutputs,
    EngineCoreRequest,
    EngineCoreRequestType,
    FinishReason,
)
from vllm.v1.engine.core import EngineCoreProc
from vllm.v1.metrics.stats import SchedulerStats
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

from .handshake import EngineSockets
from .sequence import Sequence
from .utility import MockState, answer


@dataclass
class EngineOptions:
    """The knobs every engine identity of one mock process shares."""

    step_ms: float
    vocab_size: int
    chunk_size: int
    seed: int
    log_requests: bool
    max_model_len: int
    stats: bool


class DeathSwitch:
    """``--die-after-requests K``: the (K+1)-th ADD, on any engine, kills them all."""

    def __init__(self, after: int | None) -> None:
        self.after = after
        self.seen = 0
        self.fired = threading.Event()
        self._lock = threading.Lock()

    def admit(self) -> bool:
        """Count one ADD; False (and fired) when it is past the limit."""
        with self._lock:
            self.seen += 1
            if self.after is not None and self.seen > self.after:
                self.fired.set()
                return False
            return True


def log(message: str) -> None:
    print(f"vllm-mock: {message}", file=sys.stderr, flush=True)


class Engine:
    """The serving loop of one engine identity (one data-parallel rank)."""

    def __init__(self, index: int, sockets: EngineSockets, opts: EngineOptions,
                 death: DeathSwitch) -> None:
        self.index = index
        self.sockets = sockets
        self.opts = opts
        self.death = death
        self.state = MockState()
        self.running: dict[str, Sequence] = {}
        self.steps = 0
        self.encoder = MsgpackEncoder()
        self.add_decoder = MsgpackDecoder(EngineCoreRequest)
        self.decoder = MsgpackDecoder()

    def run(self, stop: threading.Event) -> None:
        poller = zmq.Poller()
        for sock in self.sockets.inputs:
            poller.register(sock, zmq.POLLIN)
        if self.sockets.coordinator_input is not None:
            poller.register(self.sockets.coordinator_input, zmq.POLLIN)
        next_step = time.monotonic()
        while not stop.is_set() and not self.death.fired.is_set():
            now = time.monotonic()
            timeout = max(0.0, next_step - now) * 1000 if self.running else 100
            for sock, _ in poller.poll(timeout):
                self._drain(sock)
            if self.death.fired.is_set():
                break
            now = time.monotonic()
            if not self.running:
                next_step = now
            elif now >= next_step:
                self._step()
                next_step = max(next_step + self.opts.step_ms / 1000, now)
        if self.death.fired.is_set():
            self._send_dead()

    def _drain(self, sock: zmq.Socket) -> None:
        while True:
            try:
                frames = sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            self._handle(sock, frames)
            if self.death.fired.is_set():
                return

    def _handle(self, sock: zmq.Socket, frames: list[Any]) -> None:
        kind = bytes(frames[0].buffer)
        if kind == b"READY" and sock is self.sockets.coordinator_input:
            return
        try:
            request_type = EngineCoreRequestType(kind)
        except ValueError:
            log(f"engine {self.index}: unknown request type {kind!r}; ignored")
            return
        data = frames[1:]
        if request_type == EngineCoreRequestType.ADD:
            self._add(self.add_decoder.decode(data))
        elif request_type == EngineCoreRequestType.ABORT:
            self._abort(list(self.decoder.decode(data)))
        elif request_type == EngineCoreRequestType.UTILITY:
            client_index, call_id, method, args = self.decoder.decode(data)
            if self.opts.log_requests:
                log(f"engine {self.index}: utility {method} call {call_id}")
            self._send(client_index, EngineCoreOutputs(
                engine_index=self.index,
                utility_output=answer(self.state, call_id, method, args)))
        elif request_type == EngineCoreRequestType.START_DP_WAVE:
            return

    def _add(self, request: EngineCoreRequest) -> None:
        if not self.death.admit():
            log(f"engine {self.index}: request {request.request_id} is past "
                f"--die-after-requests {self.death.after}; sending ENGINE_CORE_DEAD")
            return
        rid = request.request_id
        params = request.sampling_params
        if self.opts.log_requests:
            log(f"engine {self.index}: add {rid} prompt_len={len(request.prompt_token_ids or ())} "
                f"max_tokens={params.max_tokens if params else None} "
                f"n={params.n if params else None} "
                f"logprobs={params.logprobs if params else None} "
                f"prompt_logprobs={params.prompt_logprobs if params else None} "
                f"structured={params.structured_outputs if params else None}")
        if params is None or rid in self.running:
            why = "no sampling params" if params is None else "duplicate request id"
            log(f"engine {self.index}: request {rid} refused ({why}); finished with ERROR")
            self._send(request.client_index, self._outputs(
                [EngineCoreOutput(rid, [], finish_reason=FinishReason.ERROR)], {rid}))
            return
        self.running[rid] = Sequence.start(request, self.opts.vocab_size,
                                           self.opts.max_model_len, self.opts.seed, self.index)

    def _abort(self, request_ids: list[str]) -> None:
        by_client: dict[int, list[EngineCoreOutput]] = defaultdict(list)
        for rid in request_ids:
            seq = self.running.pop(rid, None)
            if self.opts.log_requests:
                log(f"engine {self.index}: abort {rid} "
                    f"({'running' if seq else 'not running'})")
            if seq is not None:
                by_client[seq.client_index].append(
                    EngineCoreOutput(rid, [], finish_reason=FinishReason.ABORT))
        for client, outs in by_client.items():
            self._send(client, self._outputs(outs, {o.request_id for o in outs}))

    def _step(self) -> None:
        self.steps += 1
        by_client: dict[int, list[EngineCoreOutput]] = defaultdict(list)
        done: dict[int, set[str]] = defaultdict(set)
        for rid, seq in list(self.running.items()):
            out = seq.step(self.opts.chunk_size)
            by_client[seq.client_index].append(out)
            if seq.finished:
                done[seq.client_index].add(rid)
                del self.running[rid]
                if self.opts.log_requests:
                    log(f"engine {self.index}: finish {rid} reason={out.finish_reason!s} "
                        f"output_tokens={seq.generated}")
        for client, outs in by_client.items():
            self._send(client, self._outputs(outs, done.get(client)))

    def _outputs(self, outs: list[EngineCoreOutput],
                 finished: set[str] | None) -> EngineCoreOutputs:
        stats = None
        if self.opts.stats:
            stats = SchedulerStats(
                num_running_reqs=len(self.running), num_waiting_reqs=0,
                step_counter=self.steps, current_wave=0,
                kv_cache_usage=min(1.0, len(self.running) / 256))
        return EngineCoreOutputs(engine_index=self.index, outputs=outs, scheduler_stats=stats,
                                 timestamp=time.monotonic(), finished_requests=finished or None)

    def _send(self, client_index: int, outputs: EngineCoreOutputs) -> None:
        sockets = self.sockets.outputs
        if not 0 <= client_index < len(sockets):
            log(f"engine {self.index}: client index {client_index} has no output socket "
                f"({len(sockets)} known); output dropped")
            return
        sockets[client_index].send_multipart(self.encoder.encode(outputs), copy=False)

    def _send_dead(self) -> None:
        for sock in self.sockets.outputs:
            sock.send(EngineCoreProc.ENGINE_CORE_DEAD)
        log(f"engine {self.index}: sent ENGINE_CORE_DEAD")

    def close(self) -> None:
        socks = [*self.sockets.inputs, *self.sockets.outputs,
                 self.sockets.coordinator_input, self.sockets.coordinator_output]
        for sock in socks:
            if sock is not None:
                sock.close()
