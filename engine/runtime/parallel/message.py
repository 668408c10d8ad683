"""What rank 0 tells its tensor-parallel workers, one msgpack message per broadcast.

``Allocate`` (a paged KV cache of ``num_blocks`` and an attention backend, replacing the
last), ``Step`` (one step's flat tokens and the ``StepBatch`` its attention is built
from), ``Stop``. A worker runs the forward of each ``Step`` exactly as rank 0 does, so
every all-reduce of the layers meets its twin on every rank.
"""

from __future__ import annotations

import msgspec
import numpy as np
import torch

from engine.runtime.attention.base import StepBatch


class Allocate(msgspec.Struct, tag=True, forbid_unknown_fields=True):
    num_blocks: int
    block_size: int
    attention: str  # the backend's name (attention/selection.py backend_named)


class Step(msgspec.Struct, tag=True, forbid_unknown_fields=True):
    input_ids: bytes  # int64 [T]
    positions: bytes  # int64 [T]
    slot_mapping: bytes  # int64 [T]
    single_ctx: list[int]
    single_tables: list[list[int]]
    chunk_starts: list[int]
    chunk_lens: list[int]
    chunk_tables: list[list[int]]
    # Each single query's ``Request.serial``: what a backend keeping per-sequence state
    # (resident K/V rows) keys it by on every rank.
    single_keys: list[int]


class Stop(msgspec.Struct, tag=True, forbid_unknown_fields=True):
    pass


Message = Allocate | Step | Stop
_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


def encode(message: Message) -> bytes:
    return _encoder.encode(message)


def decode(data: bytes) -> Message:
    return _decoder.decode(data)


def _bytes(t: torch.Tensor) -> bytes:
    return t.detach().to("cpu", torch.int64).numpy().tobytes()


def _tensor(data: bytes, device: torch.device) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(data, dtype=np.int64).copy()).to(device)


def step_message(input_ids: torch.Tensor, positions: torch.Tensor, batch: StepBatch
                 ) -> Step:
    """The step as rank 0 built it (its lists are encoded as they are, not copied; the
    runner keys single queries by ``Request.serial``)."""
    return Step(
        input_ids=_bytes(input_ids),
        positions=_bytes(positions),
        slot_mapping=_bytes(batch.slot_mapping),
        single_ctx=batch.single_ctx,
        single_tables=batch.single_tables,
        chunk_starts=batch.chunk_starts.tolist(),
        chunk_lens=batch.chunk_lens.tolist(),
        chunk_tables=batch.chunk_tables,
        single_keys=batch.single_keys,  # type: ignore[arg-type]
    )


def step_inputs(step: Step, block_size: int, scratch_block: int, device: torch.device
                ) -> tuple[torch.Tensor, torch.Tensor, StepBatch]:
    """The step's ``input_ids``, ``positions`` and ``StepBatch`` on ``device``."""
    batch = StepBatch(
        block_size=block_size,
        scratch_block=scratch_block,
        slot_mapping=_tensor(step.slot_mapping, device),
        single_ctx=step.single_ctx,
        single_tables=step.single_tables,
        chunk_starts=np.asarray(step.chunk_starts, dtype=np.int64),
        chunk_lens=np.asarray(step.chunk_lens, dtype=np.int64),
        chunk_tables=step.chunk_tables,
        single_keys=list(step.single_keys),
    )
    return _tensor(step.input_ids, device), _tensor(step.positions, device), batch
