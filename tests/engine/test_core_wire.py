"""ModelEngine behind the real EngineCore ZMQ loop, over ipc:// sockets."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import zmq

from engine import protocol as p
from engine.process.core import EngineCore
from tests.engine.engine_kit import hf_greedy, make_engine

pytestmark = pytest.mark.engine


def test_model_engine_through_the_zmq_loop(
    model_dirs: dict[str, Path], hf_models: dict[str, Any], tmp_path: Path
) -> None:
    engine = make_engine(model_dirs["qwen3"], block_size=4, max_model_len=64)
    input_addr, output_addr = f"ipc://{tmp_path}/input", f"ipc://{tmp_path}/output"
    ctx = zmq.Context()
    # Frontend side: always binds.
    router = ctx.socket(zmq.ROUTER)
    router.bind(input_addr)
    pull = ctx.socket(zmq.PULL)
    pull.bind(output_addr)
    # Engine side, as engine/__main__.py connects it.
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.IDENTITY, p.engine_identity(0))
    dealer.connect(input_addr)
    push = ctx.socket(zmq.PUSH)
    push.connect(output_addr)
    dealer.send_multipart([bytes([p.HandshakeKind.READY]), p.encode(engine.ready(0))])
    identity, kind, body = router.recv_multipart()
    assert identity == p.engine_identity(0) and kind[0] == p.HandshakeKind.READY
    assert p.READY_DECODER.decode(body).num_kv_blocks == engine.num_blocks

    core = EngineCore(engine, 0, dealer, push)
    stop = threading.Event()
    loop = threading.Thread(target=core.run_busy_loop, args=(stop,), daemon=True)
    loop.start()

    def send(kind: p.RequestType, message: Any) -> None:
        router.send_multipart([identity, bytes([kind]), p.encode(message)])

    prompts = {"a": list(range(10, 31)), "b": list(range(100, 107))}
    for rid, prompt in prompts.items():
        params = p.SamplingParams(max_tokens=9, temperature=0.0, ignore_eos=True)
        send(p.RequestType.ADD, p.EngineCoreRequest(rid, prompt, params, time.time()))
    send(p.RequestType.ADD, p.EngineCoreRequest(
        "huge", [5] * 60, p.SamplingParams(max_tokens=10), time.time()))
    send(p.RequestType.ADD, p.EngineCoreRequest(
        "long", [7] * 8, p.SamplingParams(max_tokens=50, ignore_eos=True), time.time()))
    send(p.RequestType.UTILITY, p.UtilityRequest(call_id=1, method="ping"))

    tokens: dict[str, list[int]] = {rid: [] for rid in prompts}
    finish: dict[str, p.EngineCoreOutput] = {}
    utility: p.UtilityOutput | None = None
    last_stats: p.SchedulerStats | None = None
    aborted = False
    deadline = time.monotonic() + 60
    poller = zmq.Poller()
    poller.register(pull, zmq.POLLIN)
    try:
        while len(finish) < 4 or utility is None:
            assert time.monotonic() < deadline, f"timed out; finished {sorted(finish)}"
            if not poller.poll(1000):
                continue
            message = p.OUTPUTS_DECODER.decode(pull.recv())
            assert message.engine_index == 0
            last_stats = message.scheduler_stats or last_stats
            if message.utility_output is not None:
                utility = message.utility_output
            for out in message.outputs:
                if out.request_id in tokens:
                    tokens[out.request_id].extend(out.new_token_ids)
                if out.request_id == "long" and not aborted:
                    send(p.RequestType.ABORT, p.AbortRequests(["long"]))
                    aborted = True
                if out.finish_reason is not None:
                    finish[out.request_id] = out
    finally:
        stop.set()
        loop.join(timeout=10)
        ctx.destroy(linger=0)
    assert not loop.is_alive()

    for rid, prompt in prompts.items():
        assert tokens[rid] == hf_greedy(hf_models["qwen3"], prompt, 9)
        assert finish[rid].finish_reason == "length"
    assert finish["huge"].finish_reason == "error"
    assert "exceeds max_model_len (64)" in finish["huge"].error_message
    assert finish["long"].finish_reason == "abort"
    assert utility.call_id == 1 and utility.success and utility.result == "pong"
    assert last_stats is not None and last_stats.num_running == 0
    assert last_stats.num_free_blocks == last_stats.num_total_blocks
