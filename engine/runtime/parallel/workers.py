"""Rank 0's side of tensor parallel: start the worker processes, mirror each step to
them, watch them.

Workers (``python -m engine.runtime.parallel.worker``) are children of the engine
process, in its process group, so a frontend that stops the engine's group stops them
too; each also dies with its parent (``PR_SET_PDEATHSIG``). A worker that exits while
the engine runs takes the engine down at once. The watch thread logs which rank died and
why (a worker that fails writes its reason to the rendezvous store). A step that was
waiting on it fails (gloo sees the closed peer) with that reason as a
``TensorParallelError``, which the engine treats as fatal: the dead sentinel reaches the
frontend, which answers 503 and exits, as for any engine death. An idle engine is ended
by the watch thread itself, ``DEATH_GRACE_S`` later. No collective waits for a dead rank.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import msgspec
import torch

from engine import protocol as p
from engine.config import EngineConfig
from engine.runtime.attention.base import StepBatch
from engine.runtime.parallel import message as m
from engine.runtime.parallel.group import TensorParallelError, TensorParallelGroup

logger = logging.getLogger("vrs.engine")

T = TypeVar("T")
WATCH_INTERVAL_S = 0.1
# How long after a worker's death the engine process may still take to end on its own.
DEATH_GRACE_S = 1.0
# Bounds the rendezvous: every rank joins within it.
STORE_TIMEOUT_S = 600.0
# Bounds each collective. A worker waits in one for the next step however long the engine
# stays idle, so this is no watchdog: a rank that dies is seen by its process (``_watch``,
# and PR_SET_PDEATHSIG in the workers), and gloo fails a collective whose peer closed.
GROUP_TIMEOUT_S = 30 * 86400.0


def rank_device(device: torch.device, rank: int) -> torch.device:
    """Rank ``rank``'s device: the CPU for every rank, or CUDA device ``rank``."""
    return device if device.type == "cpu" else torch.device("cuda", rank)


def failure_key(rank: int) -> str:
    return f"vrs/failed/{rank}"


class TensorParallelWorkers:
    """Ranks 1..N-1 of one engine, as rank 0 drives them (a ``StepMirror``)."""

    def __init__(self, config: EngineConfig, device: torch.device) -> None:
        size = config.tensor_parallel_size
        self.size = size
        self.device = device
        self.memory: list[p.RankMemory] = []
        self._threads = torch.get_num_threads()
        env = dict(os.environ)
        if device.type == "cpu":  # the ranks share the cores, rather than each taking all
            threads = max(1, self._threads // size)
            torch.set_num_threads(threads)
            env.setdefault("OMP_NUM_THREADS", str(threads))
        self.store = TensorParallelGroup.host_store(size, STORE_TIMEOUT_S)
        config_json = msgspec.json.encode(config).decode()
        self.processes: dict[int, subprocess.Popen[bytes]] = {}
        for rank in range(1, size):
            self.processes[rank] = subprocess.Popen(
                [sys.executable, "-m", "engine.runtime.parallel.worker",
                 "--rank", str(rank), "--store-port", str(self.store.port),
                 "--parent", str(os.getpid()), "--config-json", config_json],
                env=env, stdin=subprocess.DEVNULL)
        self._stopping = threading.Event()
        threading.Thread(target=self._watch, name="vrs-tp-watch", daemon=True).start()
        logger.info("tensor parallel: %d ranks on %s (workers: pids %s)", size, device.type,
                    ", ".join(str(proc.pid) for proc in self.processes.values()))
        self.group = TensorParallelGroup(self.store, 0, size, device, GROUP_TIMEOUT_S)

    # ---------------------------------------------------------------- StepMirror

    def allocate(self, num_blocks: int, block_size: int, attention: str,
                 weight_bytes: int, kv_cache_bytes: int) -> None:
        self._send(m.Allocate(num_blocks=num_blocks, block_size=block_size,
                              attention=attention))
        rows = self._collective(lambda: self.group.all_gather_ints(
            [weight_bytes, kv_cache_bytes]))
        self.memory = [p.RankMemory(rank=rank, device=str(rank_device(self.device, rank)),
                                    weight_bytes=w, kv_cache_bytes=kv)
                       for rank, (w, kv) in enumerate(rows)]

    def step(self, input_ids: torch.Tensor, positions: torch.Tensor, batch: StepBatch
             ) -> None:
        self._send(m.step_message(input_ids, positions, batch))

    # ---------------------------------------------------------------- lifecycle

    def _send(self, message: m.Message) -> None:
        data = m.encode(message)
        self._collective(lambda: self.group.send(data))

    def _collective(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except RuntimeError as exc:  # gloo/NCCL: a peer closed, or the timeout passed
            raise self.failure(f"a tensor-parallel collective failed: {exc}") from exc

    def failure(self, otherwise: str) -> TensorParallelError:
        """The error to end the engine with after a failed collective or step: the worker
        that died (given ``DEATH_GRACE_S`` to be seen exiting; gloo may notice first),
        else ``otherwise``."""
        deadline = time.monotonic() + DEATH_GRACE_S
        while (dead := self._dead()) is None and time.monotonic() < deadline:
            time.sleep(WATCH_INTERVAL_S / 2)
        return TensorParallelError(dead or otherwise)

    def _dead(self) -> str | None:
        """Which worker has exited, and why; None while all run."""
        for rank, proc in self.processes.items():
            code = proc.poll()
            if code is not None:
                reason = self._reason(rank)
                return (f"tensor-parallel worker rank {rank} (pid {proc.pid}) exited with code "
                        f"{code}{f': {reason}' if reason else ''}")
        return None

    def _watch(self) -> None:
        """A dead worker: say so at once; give a step that was waiting on it the grace to
        fail and end the engine through its fatal path (the frontend is told); else (the
        engine was idle) exit the engine process here."""
        while not self._stopping.wait(WATCH_INTERVAL_S):
            dead = self._dead()
            if dead is None:
                continue
            logger.error("%s; the engine cannot run without it and exits", dead)
            if self._stopping.wait(DEATH_GRACE_S):
                return
            self._kill()
            for handler in logging.getLogger().handlers:
                handler.flush()
            os._exit(1)

    def _reason(self, rank: int) -> str:
        try:
            if self.store.check([failure_key(rank)]):
                reason: bytes = self.store.get(failure_key(rank))
                return reason.decode(errors="replace")
        except RuntimeError:
            pass
        return ""

    def _kill(self) -> None:
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.processes.values():
            proc.wait()

    def abort(self) -> None:
        """Kill the workers now (rank 0 failed mid-way: no message can reach them)."""
        self._stopping.set()
        self._kill()
        torch.set_num_threads(self._threads)

    def stop(self, grace_s: float = 5.0) -> None:
        """Tell the workers to stop, wait ``grace_s`` for them, kill what is left."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        try:
            self._send(m.Stop())
        except TensorParallelError:
            pass
        deadline = time.monotonic() + grace_s
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        torch.set_num_threads(self._threads)
