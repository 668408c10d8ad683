"""The mock engine behind the real wire: handshake, ADD/ABORT, stop rules, the launcher."""

from __future__ import annotations

import json
import time
from pathlib import Path

import msgspec
import pytest
import zmq

from engine import protocol as p
from engine.process.launcher import EngineGroup, EngineStartError, start_engines

pytestmark = pytest.mark.e2e


class Frontend:
    """A minimal frontend: input ROUTER + output PULL, as vrs-rs binds them."""

    def __init__(self, tmp_path: Path) -> None:
        self.ctx = zmq.Context()
        self.input = self.ctx.socket(zmq.ROUTER)
        self.output = self.ctx.socket(zmq.PULL)
        self.input_address = f"ipc://{tmp_path}/input"
        self.output_address = f"ipc://{tmp_path}/output"
        self.input.bind(self.input_address)
        self.output.bind(self.output_address)

    def wait_ready(self) -> p.Ready:
        assert self.input.poll(20_000), "engine sent no READY on the input socket"
        identity, kind, body = self.input.recv_multipart()
        assert kind[0] == p.HandshakeKind.READY
        ready = p.READY_DECODER.decode(body)
        assert identity == p.engine_identity(ready.engine_index)
        self.identity = identity
        return ready

    def add(self, request_id: str, prompt: list[int], **params) -> None:
        request = p.EngineCoreRequest(request_id, prompt, p.SamplingParams(**params), time.time())
        self.input.send_multipart([self.identity, bytes([p.RequestType.ADD]), p.encode(request)])

    def abort(self, *request_ids: str) -> None:
        body = p.encode(p.AbortRequests(list(request_ids)))
        self.input.send_multipart([self.identity, bytes([p.RequestType.ABORT]), body])

    def collect(self, request_ids: set[str], timeout: float = 20.0) -> dict[str, list]:
        """Outputs per request until each has finished."""
        results: dict[str, list[p.EngineCoreOutput]] = {r: [] for r in request_ids}
        pending = set(request_ids)
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"requests {pending} did not finish"
            if not self.output.poll(100):
                continue
            frame = self.output.recv()
            assert frame != p.ENGINE_DEAD_SENTINEL, "engine died"
            message = p.OUTPUTS_DECODER.decode(frame)
            assert message.scheduler_stats is not None
            for out in message.outputs:
                results[out.request_id].append(out)
                if out.finish_reason is not None:
                    pending.discard(out.request_id)
        return results

    def close(self) -> None:
        self.ctx.destroy(linger=0)


def tokens(outputs: list[p.EngineCoreOutput]) -> list[int]:
    return [t for out in outputs for t in out.new_token_ids]


@pytest.fixture
def mock_model(tmp_path: Path) -> Path:
    """A weightless model dir with a tiny vocab, so that EOS (id 5) comes up quickly."""
    model = tmp_path / "tiny-mock"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(
        {"vocab_size": 8, "max_position_embeddings": 64, "eos_token_id": 5}))
    return model


@pytest.fixture
def engine(tmp_path: Path, mock_model: Path):
    frontend = Frontend(tmp_path)
    group = start_engines({"model": str(mock_model), "mock": True}, frontend.input_address,
                          frontend.output_address)
    ready = frontend.wait_ready()
    yield frontend, group, ready
    group.stop(grace_s=2)
    frontend.close()


def test_ready_describes_the_model(engine) -> None:
    _, group, ready = engine
    assert ready.is_mock and ready.vocab_size == 8 and ready.eos_token_ids == [5]
    assert ready.max_model_len == 64
    assert group.readies[0] == ready


def test_max_tokens_ignore_eos_and_seed(engine) -> None:
    frontend, _, _ = engine
    frontend.add("a", [3, 4], max_tokens=20, ignore_eos=True, seed=7)
    frontend.add("b", [3, 4], max_tokens=20, ignore_eos=True, seed=7)
    out = frontend.collect({"a", "b"})
    assert len(tokens(out["a"])) == 20
    assert out["a"][-1].finish_reason == "length"
    assert tokens(out["a"]) == tokens(out["b"]), "same seed, same tokens"
    assert 5 in tokens(out["a"]), "vocab of 8 over 20 draws should hit the EOS id"


def test_eos_and_min_tokens(engine) -> None:
    frontend, _, _ = engine
    frontend.add("eos", [3], max_tokens=40, seed=1)
    frontend.add("min", [3], max_tokens=40, min_tokens=30, seed=1)
    out = frontend.collect({"eos", "min"})
    eos_tokens = tokens(out["eos"])
    assert out["eos"][-1].finish_reason == "stop"
    assert eos_tokens[-1] == 5 and out["eos"][-1].stop_token_id == 5
    assert 5 not in eos_tokens[:-1]
    assert len(tokens(out["min"])) >= 30


def test_stop_token_ids(engine) -> None:
    frontend, _, _ = engine
    frontend.add("s", [3], max_tokens=50, ignore_eos=True, stop_token_ids=[6, 7], seed=3)
    out = frontend.collect({"s"})
    toks = tokens(out["s"])
    assert toks[-1] in (6, 7) and out["s"][-1].finish_reason == "stop"
    assert not set(toks[:-1]) & {6, 7}


def test_abort_stops_a_request_at_once(tmp_path: Path, mock_model: Path) -> None:
    # 5 ms a step: the request needs ~300 ms to reach max_model_len, so only the abort
    # can end it sooner.
    frontend = Frontend(tmp_path)
    group = start_engines({"model": str(mock_model), "mock": True, "mock_step_delay_ms": 5.0},
                          frontend.input_address, frontend.output_address)
    try:
        frontend.wait_ready()
        frontend.add("long", [3], max_tokens=10_000_000, ignore_eos=True)
        frontend.abort("long")
        out = frontend.collect({"long"})
        assert out["long"][-1].finish_reason == "abort"
        assert len(tokens(out["long"])) < 40
    finally:
        group.stop(grace_s=2)
        frontend.close()


def test_prompt_over_max_model_len_is_an_error_not_a_crash(engine) -> None:
    frontend, _, _ = engine
    frontend.add("big", [3] * 100, max_tokens=1)
    out = frontend.collect({"big"})
    assert out["big"][-1].finish_reason == "error"
    assert "64" in out["big"][-1].error_message
    frontend.add("ok", [3], max_tokens=2, ignore_eos=True)
    assert len(tokens(frontend.collect({"ok"})["ok"])) == 2


def test_sigterm_stops_the_engine_cleanly(engine) -> None:
    _, group, _ = engine
    group.stop(grace_s=5)
    assert group.processes[0].returncode == 0


def test_bad_config_is_a_clear_startup_error(tmp_path: Path, mock_model: Path) -> None:
    frontend = Frontend(tmp_path)
    try:
        with pytest.raises(EngineStartError, match="block_size"):
            start_engines({"model": str(mock_model), "mock": True, "block_size": 3},
                          frontend.input_address, frontend.output_address)
        with pytest.raises(EngineStartError, match="not found"):
            start_engines({"model": str(tmp_path / "nope"), "mock": True},
                          frontend.input_address, frontend.output_address)
    finally:
        frontend.close()


def test_two_engines_answer_by_identity(tmp_path: Path, mock_model: Path) -> None:
    frontend = Frontend(tmp_path)
    group: EngineGroup = start_engines({"model": str(mock_model), "mock": True},
                                       frontend.input_address, frontend.output_address, count=2)
    try:
        seen = {frontend.wait_ready().engine_index for _ in range(2)}
        assert seen == {0, 1}
        for index in (0, 1):
            frontend.identity = p.engine_identity(index)
            frontend.add(f"r{index}", [3], max_tokens=3, ignore_eos=True)
        out = frontend.collect({"r0", "r1"})
        assert all(len(tokens(v)) == 3 for v in out.values())
    finally:
        group.stop(grace_s=2)
        frontend.close()


def test_wire_structs_roundtrip_in_python() -> None:
    request = p.EngineCoreRequest("x", [1, 2], p.SamplingParams(max_tokens=3, seed=-1), 1.5)
    assert p.ADD_DECODER.decode(p.encode(request)) == request
    # A shorter array (an older peer) still decodes, filling defaults.
    short = msgspec.msgpack.encode([5])
    assert msgspec.msgpack.decode(short, type=p.SamplingParams).max_tokens == 5
