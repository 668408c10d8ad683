"""The process group of one engine's tensor-parallel ranks.

A torch.distributed backend object of its own (``ProcessGroupGloo`` on CPU,
``ProcessGroupNCCL`` on CUDA), not the global default group, so that several engines
(data parallel, or the tests) each have theirs. Rank 0 hosts the rendezvous store on a
free loopback port and tells the workers it.

Rank 0 sends messages (message.py) by two broadcasts: the length, then the bytes.
"""

from __future__ import annotations

import datetime
from typing import Any

import torch
from torch._C._distributed_c10d import ProcessGroupGloo, Store, TCPStore

STORE_HOST = "127.0.0.1"


class TensorParallelError(RuntimeError):
    """A collective failed (a rank died or timed out): the engine cannot go on."""


class TensorParallelGroup:
    def __init__(self, store: Store, rank: int, size: int, device: torch.device,
                 timeout_s: float) -> None:
        self.store = store
        self.rank = rank
        self.size = size
        self.device = device
        timeout = datetime.timedelta(seconds=timeout_s)
        # The backend object: it has ProcessGroup's collectives, which torch's stubs
        # declare on ProcessGroup only.
        self.pg: Any
        if device.type == "cuda":
            from torch._C._distributed_c10d import ProcessGroupNCCL

            nccl = ProcessGroupNCCL.Options()
            nccl._timeout = timeout
            self.pg = ProcessGroupNCCL(store, rank, size, nccl)
        else:
            # Loopback explicitly: the ranks are processes of this host.
            options = ProcessGroupGloo._Options()  # type: ignore[attr-defined]
            options._timeout = timeout
            options._devices = [ProcessGroupGloo.create_device(hostname=STORE_HOST)]
            self.pg = ProcessGroupGloo(store, rank, size, options)

    @staticmethod
    def host_store(size: int, timeout_s: float) -> TCPStore:
        """Rank 0's rendezvous store, on a free loopback port (``.port``)."""
        return TCPStore(STORE_HOST, 0, size, True,
                             timeout=datetime.timedelta(seconds=timeout_s),
                             wait_for_workers=False)

    @staticmethod
    def join_store(port: int, size: int, timeout_s: float) -> TCPStore:
        return TCPStore(STORE_HOST, port, size, False,
                             timeout=datetime.timedelta(seconds=timeout_s))

    def all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over the ranks, in place; returns it."""
        self.pg.allreduce([tensor]).wait()
        return tensor

    def send(self, data: bytes) -> None:
        """Rank 0: broadcast ``data`` to every worker."""
        length = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        self.pg.broadcast(length, 0).wait()
        payload = torch.frombuffer(bytearray(data), dtype=torch.uint8).to(self.device)
        self.pg.broadcast(payload, 0).wait()

    def receive(self) -> bytes:
        """A worker: the next ``send`` of rank 0."""
        length = torch.zeros(1, dtype=torch.int64, device=self.device)
        self.pg.broadcast(length, 0).wait()
        payload = torch.empty(int(length.item()), dtype=torch.uint8, device=self.device)
        self.pg.broadcast(payload, 0).wait()
        return payload.cpu().numpy().tobytes()

    def all_gather_ints(self, values: list[int]) -> list[list[int]]:
        """Every rank's ``values`` (the same count on each), by rank."""
        mine = torch.tensor(values, dtype=torch.int64, device=self.device)
        out = [torch.zeros_like(mine) for _ in range(self.size)]
        self.pg.allgather([out], [mine]).wait()
        return [[int(v) for v in t.cpu().tolist()] for t in out]
