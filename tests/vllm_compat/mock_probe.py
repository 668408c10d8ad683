"""A minimal vLLM frontend that drives mock_engine.py over the real wire and reports.

Run with the vllm 0.33.0 interpreter: ``python mock_probe.py -- <mock args>``. It binds a
handshake ROUTER, an input ROUTER and an output PULL the way vLLM's frontend does, starts
the mock, runs the handshake, sends UTILITY / ADD / ABORT messages encoded by vLLM's own
``MsgpackEncoder``, decodes what comes back with ``MsgpackDecoder(EngineCoreOutputs)``,
and prints one JSON object of observations (tests/vllm_compat/test_mock_engine.py checks
them). Requests: ``plain`` (5 tokens, logprobs 2, prompt logprobs 1, ignore_eos),
``stops`` (stop_token_ids [3], min_tokens 4, eos 5), ``aborted`` (aborted after its first
output), then ``fatal`` (past ``--die-after-requests 3``: ENGINE_CORE_DEAD).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import msgspec  # noqa: E402
import zmq  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.v1.engine import EngineCoreOutputs, EngineCoreReadyResponse, EngineCoreRequest  # noqa: E402
from vllm.v1.engine.utils import EngineHandshakeMetadata, EngineZmqAddresses  # noqa: E402
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder  # noqa: E402

HERE = Path(__file__).resolve().parent
IDENTITY = (0).to_bytes(2, "little")
ENCODER = MsgpackEncoder()
DECODER = MsgpackDecoder(EngineCoreOutputs)


def request(rid: str, params: SamplingParams, eos: int | None = None) -> EngineCoreRequest:
    if eos is not None:  # what vLLM's InputProcessor adds from the tokenizer
        params._eos_token_id = eos
        params._all_stop_token_ids.add(eos)
    return EngineCoreRequest(rid, [1, 2, 3, 4], None, params, None, time.time(), None, None,
                             None)


class Probe:
    def __init__(self, ctx: zmq.Context) -> None:
        self.hs = ctx.socket(zmq.ROUTER)
        self.inp = ctx.socket(zmq.ROUTER)
        self.out = ctx.socket(zmq.PULL)
        ports = [s.bind_to_random_port("tcp://127.0.0.1") for s in (self.hs, self.inp, self.out)]
        self.hs_addr, self.in_addr, self.out_addr = (f"tcp://127.0.0.1:{p}" for p in ports)

    def recv(self, sock: zmq.Socket, what: str, timeout_s: float = 60) -> list[bytes]:
        if not sock.poll(int(timeout_s * 1000)):
            raise SystemExit(f"mock_probe: no {what} in {timeout_s:g} s")
        return sock.recv_multipart()

    def send(self, kind: bytes, obj: Any) -> None:
        self.inp.send_multipart([IDENTITY, kind, *ENCODER.encode(obj)], copy=False)

    def outputs(self, what: str) -> EngineCoreOutputs | bytes:
        frames = self.recv(self.out, what)
        if frames == [b"ENGINE_CORE_DEAD"]:
            return frames[0]
        return DECODER.decode(frames)


def run(mock_args: list[str]) -> dict[str, Any]:
    ctx = zmq.Context()
    p = Probe(ctx)
    mock = subprocess.Popen([sys.executable, str(HERE / "mock_engine.py"),
                             "--handshake-address", p.hs_addr, *mock_args])
    seen: dict[str, Any] = {}
    try:
        ident, hello = p.recv(p.hs, "HELLO")
        seen["identity"] = list(ident)
        seen["hello"] = msgspec.msgpack.decode(hello)
        meta = EngineHandshakeMetadata(
            addresses=EngineZmqAddresses(inputs=[p.in_addr], outputs=[p.out_addr]),
            parallel_config={})
        p.hs.send_multipart([ident, msgspec.msgpack.encode(meta)])
        _, ready_payload = p.recv(p.inp, "ready response")
        ready = msgspec.msgpack.decode(ready_payload, type=EngineCoreReadyResponse)
        seen["ready_response"] = {"max_model_len": ready.max_model_len,
                                  "data_parallel_rank": ready.data_parallel_rank,
                                  "vllm_version": ready.vllm_version}
        seen["ready"] = msgspec.msgpack.decode(p.recv(p.hs, "READY")[1])

        for call_id, method in ((7, "get_supported_tasks"), (8, "no_such_method")):
            p.send(b"\x03", (0, call_id, method, ()))
            util = p.outputs(method).utility_output
            seen[method] = {"call_id": util.call_id, "failure": util.failure_message,
                            "result": None if util.result is None else util.result.result}

        p.send(b"\x00", request("plain", SamplingParams(
            max_tokens=5, logprobs=2, prompt_logprobs=1, ignore_eos=True)))
        p.send(b"\x00", request("stops", SamplingParams(
            max_tokens=400, stop_token_ids=[3], min_tokens=4), eos=5))
        runs: dict[str, dict[str, Any]] = {
            rid: {"tokens": [], "logprob_shapes": [], "prompt_logprob_shapes": [],
                  "finish": None, "stop_reason": None, "stats": 0}
            for rid in ("plain", "stops", "aborted")}
        aborted_sent = False
        while any(r["finish"] is None for r in runs.values()):
            outs = p.outputs("request outputs")
            assert isinstance(outs, EngineCoreOutputs)
            runs_stats = outs.scheduler_stats is not None
            for o in outs.outputs:
                r = runs[o.request_id]
                r["tokens"] += o.new_token_ids
                r["stats"] += runs_stats
                if o.new_logprobs is not None:
                    r["logprob_shapes"].append(list(o.new_logprobs.logprob_token_ids.shape))
                if o.new_prompt_logprobs_tensors is not None:
                    r["prompt_logprob_shapes"].append(
                        list(o.new_prompt_logprobs_tensors.logprob_token_ids.shape))
                if o.finish_reason is not None:
                    r["finish"] = str(o.finish_reason)
                    r["stop_reason"] = o.stop_reason
            if not aborted_sent and runs["plain"]["finish"] and runs["stops"]["finish"]:
                p.send(b"\x00", request("aborted", SamplingParams(max_tokens=100000,
                                                                  ignore_eos=True)))
                aborted_sent = True
            elif aborted_sent and runs["aborted"]["tokens"] and runs["aborted"]["finish"] is None:
                p.send(b"\x01", ["aborted"])
        seen["requests"] = runs
        p.send(b"\x00", request("fatal", SamplingParams(max_tokens=2)))
        last = p.outputs("ENGINE_CORE_DEAD")
        while not isinstance(last, bytes):
            last = p.outputs("ENGINE_CORE_DEAD")
        seen["dead"] = last.decode()
        seen["exit_code"] = mock.wait(timeout=30)
        return seen
    finally:
        if mock.poll() is None:
            mock.kill()
            mock.wait()
        ctx.destroy(linger=0)


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(run(args[1:] if args[:1] == ["--"] else args)))
