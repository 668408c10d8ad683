"""The real engine process (``python -m engine --headless``) behind the launcher, over
real ZMQ: startup errors, prompt logprobs, logits processors and first-output timings."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import zmq

from engine import protocol as p
from engine.process.launcher import EngineStartError, start_engines
from tests.engine.engine_kit import hf_greedy

pytestmark = pytest.mark.e2e


class Frontend:
    """The frontend's side of the sockets: input ROUTER + output PULL, both bound."""

    def __init__(self, tmp_path: Path) -> None:
        self.ctx = zmq.Context()
        self.input = self.ctx.socket(zmq.ROUTER)
        self.output = self.ctx.socket(zmq.PULL)
        self.input_address = f"ipc://{tmp_path}/input"
        self.output_address = f"ipc://{tmp_path}/output"
        self.input.bind(self.input_address)
        self.output.bind(self.output_address)
        self.identity = b""

    def wait_ready(self) -> p.Ready:
        assert self.input.poll(60_000), "engine sent no READY on the input socket"
        self.identity, kind, body = self.input.recv_multipart()
        assert kind[0] == p.HandshakeKind.READY
        return p.READY_DECODER.decode(body)

    def add(self, request_id: str, prompt: list[int], params: p.SamplingParams) -> None:
        body = p.encode(p.EngineCoreRequest(request_id, prompt, params, time.time()))
        self.input.send_multipart([self.identity, bytes([p.RequestType.ADD]), body])

    def collect(self, request_ids: set[str], timeout: float = 60.0) -> dict[str, list[Any]]:
        results: dict[str, list[p.EngineCoreOutput]] = {r: [] for r in request_ids}
        pending = set(request_ids)
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"requests {pending} did not finish"
            if not self.output.poll(100):
                continue
            frame = self.output.recv()
            assert frame != p.ENGINE_DEAD_SENTINEL, "engine died"
            for out in p.OUTPUTS_DECODER.decode(frame).outputs:
                results[out.request_id].append(out)
                if out.finish_reason is not None:
                    pending.discard(out.request_id)
        return results

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def test_unsupported_architecture_logs_the_message_without_a_traceback(
    model_dirs: dict[str, Path], tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "gpt2ish"
    shutil.copytree(model_dirs["llama"], bad)
    config = json.loads((bad / "config.json").read_text())
    config["architectures"] = ["FooForCausalLM"]
    (bad / "config.json").write_text(json.dumps(config))
    frontend = Frontend(tmp_path)
    try:
        with pytest.raises(EngineStartError, match="FooForCausalLM"):
            start_engines(
                {"model": str(bad), "device": "cpu", "dtype": "float32"},
                frontend.input_address,
                frontend.output_address,
            )
    finally:
        frontend.close()
    stderr = capfd.readouterr().err
    assert "vrs has no implementation of this model's architecture (FooForCausalLM" in stderr
    assert "vrs's own decoder serves LlamaForCausalLM" in stderr
    assert "transformers ships no causal LM named FooForCausalLM" in stderr
    assert "Traceback" not in stderr


def test_prompt_logprobs_bias_and_timings_over_zmq(
    model_dirs: dict[str, Path], hf_models: dict[str, Any], tmp_path: Path
) -> None:
    frontend = Frontend(tmp_path)
    config = {
        "model": str(model_dirs["qwen3"]),
        "device": "cpu",
        "dtype": "float32",
        "block_size": 4,
        "max_num_batched_tokens": 16,
    }
    group = start_engines(config, frontend.input_address, frontend.output_address)
    try:
        frontend.wait_ready()
        prompt = [(i * 41 + 9) % 511 + 1 for i in range(40)]  # three prefill chunks
        greedy = dict(temperature=0.0, ignore_eos=True)
        frontend.add("plp", prompt, p.SamplingParams(max_tokens=3, prompt_logprobs=4, **greedy))
        frontend.add(
            "bias", prompt[:9], p.SamplingParams(max_tokens=5, logit_bias=[(321, 100.0)], **greedy)
        )
        results = frontend.collect({"plp", "bias"})
    finally:
        group.stop()
        frontend.close()

    plp = results["plp"]
    entries = plp[0].prompt_logprobs
    assert entries is not None and all(out.prompt_logprobs is None for out in plp[1:])
    with torch.inference_mode():
        logits = hf_models["qwen3"](torch.tensor([prompt])).logits[0]
    reference = torch.log_softmax(logits.float(), dim=-1)
    assert len(entries) == len(prompt) - 1
    for i, entry in enumerate(entries):
        row, token = reference[i], prompt[i + 1]
        assert entry.token_id == token and abs(entry.logprob - float(row[token])) < 1e-4
        assert entry.rank == int((row > row[token]).sum()) + 1
        assert entry.top_token_ids == torch.topk(row, 4).indices.tolist()
    assert [t for out in plp for t in out.new_token_ids] == hf_greedy(hf_models["qwen3"], prompt, 3)
    assert [t for out in results["bias"] for t in out.new_token_ids] == [321] * 5
    for outs in results.values():
        assert outs[0].queue_time is not None and outs[0].queue_time >= 0.0
        assert outs[0].prefill_time is not None and outs[0].prefill_time >= 0.0
        assert all(o.queue_time is None and o.prefill_time is None for o in outs[1:])
