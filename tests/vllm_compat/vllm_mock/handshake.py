"""Joining a frontend-owned startup handshake as vLLM's headless engine does.

vLLM 0.33.0's ``EngineCoreProc._perform_handshake`` / ``startup_handshake`` (in
vllm/v1/engine/core.py), in the order the real engine keeps:

1. a DEALER with identity ``engine_index`` (2 bytes, little endian) connects to the
   handshake address and sends ``{"status": "HELLO", "local": .., "headless": ..}``;
2. it receives ``EngineHandshakeMetadata`` (the frontend's input and output addresses,
   the coordinator's if any, and parallel-config overrides);
3. the input DEALERs (same identity) connect and each sends the msgpack'd
   ``EngineCoreReadyResponse``; the output PUSHes connect; with a coordinator, an XSUB
   subscribes and waits for its ``READY``;
4. only then ``{"status": "READY", ...}`` goes on the handshake socket, which closes.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass

import msgspec
import zmq
from vllm.v1.engine import EngineCoreReadyResponse
from vllm.v1.engine.utils import EngineHandshakeMetadata, EngineZmqAddresses


@dataclass
class EngineShape:
    """What the mock tells the frontend about itself in its ready response."""

    max_model_len: int
    max_num_seqs: int
    num_gpu_blocks: int
    block_size: int
    data_parallel_size: int
    local: bool
    headless: bool
    parallel_config_hash: str | None


@dataclass
class EngineSockets:
    """The sockets an engine serves on, once the handshake is done."""

    inputs: list[zmq.Socket]
    outputs: list[zmq.Socket]
    coordinator_input: zmq.Socket | None
    coordinator_output: zmq.Socket | None
    addresses: EngineZmqAddresses


def engine_identity(engine_index: int) -> bytes:
    """vLLM's engine identity: the data-parallel rank as 2 little-endian bytes."""
    return engine_index.to_bytes(length=2, byteorder="little")


def ready_response(
    shape: EngineShape, engine_index: int, addresses: EngineZmqAddresses, dp_size: int
) -> EngineCoreReadyResponse:
    """The ``EngineCoreReadyResponse`` a real engine sends on each input socket."""
    return EngineCoreReadyResponse(
        max_model_len=shape.max_model_len,
        num_gpu_blocks=shape.num_gpu_blocks,
        block_size=shape.block_size,
        dp_stats_address=addresses.frontend_stats_publish_address,
        dtype="bfloat16",
        vllm_version="0.33.0",
        world_size=1,
        data_parallel_size=dp_size,
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
        decode_context_parallel_size=1,
        data_parallel_rank=engine_index,
        max_num_seqs=shape.max_num_seqs,
        max_num_batched_tokens=max(8192, shape.max_model_len),
        instance_id=f"mock-{uuid.uuid4().hex[:8]}",
        supports_lora=False,
        max_loras=0,
        kv_cache_size_tokens=shape.num_gpu_blocks * shape.block_size,
        kv_cache_max_concurrency=shape.num_gpu_blocks * shape.block_size / shape.max_model_len,
        coordinator_input_address=addresses.coordinator_input,
        coordinator_output_address=addresses.coordinator_output,
    )


def join(
    ctx: zmq.Context,
    handshake_address: str,
    engine_index: int,
    shape: EngineShape,
    timeout_s: float,
) -> EngineSockets:
    """Run the startup handshake for one engine identity; return its connected sockets.

    Raises RuntimeError naming the address when the frontend does not answer in time.
    """
    identity = engine_identity(engine_index)
    hs = ctx.socket(zmq.DEALER)
    hs.setsockopt(zmq.IDENTITY, identity)
    hs.setsockopt(zmq.LINGER, 5000)
    hs.connect(handshake_address)
    try:
        hs.send(msgspec.msgpack.encode(
            {"status": "HELLO", "local": shape.local, "headless": shape.headless}))
        if not hs.poll(int(timeout_s * 1000)):
            raise RuntimeError(
                f"engine {engine_index}: no EngineHandshakeMetadata from the frontend at "
                f"{handshake_address} within {timeout_s:.0f} s; start the frontend first "
                "(it owns the handshake socket) and check the address")
        meta = msgspec.msgpack.decode(hs.recv(), type=EngineHandshakeMetadata)
        addresses = meta.addresses
        dp_size = int(meta.parallel_config.get("data_parallel_size", shape.data_parallel_size))
        sockets = _connect(ctx, identity, addresses)
        payload = msgspec.msgpack.encode(ready_response(shape, engine_index, addresses, dp_size))
        for sock in sockets.inputs:
            sock.send(payload)
        if sockets.coordinator_input is not None:
            sockets.coordinator_input.send(b"\x01")
            if sockets.coordinator_input.recv() != b"READY":
                raise RuntimeError(f"engine {engine_index}: the DP coordinator did not "
                                   "send READY first")
        ready: dict[str, object] = {
            "status": "READY", "local": shape.local, "headless": shape.headless}
        if dp_size > 1 and shape.parallel_config_hash is not None:
            ready["parallel_config_hash"] = shape.parallel_config_hash
        hs.send(msgspec.msgpack.encode(ready))
        return sockets
    finally:
        hs.close()


def _connect(ctx: zmq.Context, identity: bytes, addresses: EngineZmqAddresses) -> EngineSockets:
    inputs = []
    for address in addresses.inputs:
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.IDENTITY, identity)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(address)
        inputs.append(sock)
    outputs = []
    for address in addresses.outputs:
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 4000)
        sock.connect(address)
        outputs.append(sock)
    coord_in = coord_out = None
    if addresses.coordinator_input is not None:
        coord_in = ctx.socket(zmq.XSUB)
        coord_in.setsockopt(zmq.IDENTITY, identity)
        coord_in.setsockopt(zmq.LINGER, 0)
        coord_in.connect(addresses.coordinator_input)
    if addresses.coordinator_output is not None:
        coord_out = ctx.socket(zmq.PUSH)
        coord_out.setsockopt(zmq.LINGER, 4000)
        coord_out.connect(addresses.coordinator_output)
    return EngineSockets(inputs, outputs, coord_in, coord_out, addresses)


def describe(shape: EngineShape) -> str:
    """One line for the log: the shape's fields."""
    return ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(shape).items())
