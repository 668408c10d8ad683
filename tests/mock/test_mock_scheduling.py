"""The mock engine's scheduling: at most ``max_num_seqs`` run, the rest wait first come,
first served, and the stats report both as the real scheduler does."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import protocol as p
from engine.config import ConfigError
from engine.mock.engine import MockEngine
from engine.process.launcher import start_engines
from tests.mock.test_mock_engine import Frontend, mock_model  # noqa: F401  (a fixture)

pytestmark = pytest.mark.e2e


def _engine(max_num_seqs: int) -> MockEngine:
    return MockEngine("m", vocab_size=5000, eos_token_ids=[2], max_model_len=4096, seed=1,
                      max_num_seqs=max_num_seqs)


def _add(engine: MockEngine, request_id: str, max_tokens: int) -> None:
    params = p.SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    assert engine.add_request(p.EngineCoreRequest(request_id, [5, 6, 7], params, 0.0)) == []


def _stats(engine: MockEngine) -> tuple[int, int]:
    stats = engine.stats()
    return stats.num_running, stats.num_waiting


def test_beyond_max_num_seqs_requests_wait_first_come_first_served() -> None:
    engine = _engine(2)
    _add(engine, "a", 2)
    _add(engine, "b", 5)
    _add(engine, "c", 5)
    _add(engine, "d", 5)
    assert _stats(engine) == (0, 4)
    first = engine.step()
    assert [o.request_id for o in first] == ["a", "b"]
    assert _stats(engine) == (2, 2)
    second = engine.step()  # "a" finishes (max_tokens 2): its slot goes to "c" next step
    assert [(o.request_id, o.finish_reason) for o in second] == [("a", "length"), ("b", None)]
    assert _stats(engine) == (1, 2)
    third = engine.step()
    assert [o.request_id for o in third] == ["b", "c"], "the oldest waiting request starts"
    assert _stats(engine) == (2, 1)
    started = {o.request_id for o in third if o.queue_time is not None}
    assert started == {"c"}, "queue_time rides on a request's first output only"


def test_an_aborted_waiting_request_never_runs_and_leaves_the_queue() -> None:
    engine = _engine(1)
    _add(engine, "run", 50)
    _add(engine, "wait", 50)
    _add(engine, "next", 50)
    engine.step()
    assert _stats(engine) == (1, 2)
    aborted = engine.abort_requests(["wait"])
    assert [(o.request_id, o.finish_reason) for o in aborted] == [("wait", "abort")]
    assert _stats(engine) == (1, 1)
    assert engine.abort_requests(["wait"]) == [], "a second abort finds nothing"
    engine.abort_requests(["run"])
    outputs = engine.step()
    assert [o.request_id for o in outputs] == ["next"]
    assert _stats(engine) == (1, 0)


def test_a_waiting_request_id_is_a_duplicate_and_keeps_the_engine_busy() -> None:
    engine = _engine(1)
    _add(engine, "a", 3)
    _add(engine, "b", 3)
    engine.step()
    params = p.SamplingParams(max_tokens=3)
    duplicate = engine.add_request(p.EngineCoreRequest("b", [5], params, 0.0))
    assert [o.error_message for o in duplicate] == ["duplicate request id"]
    finished = set()
    while engine.has_unfinished_requests():
        finished |= {o.request_id for o in engine.step() if o.finish_reason is not None}
    assert finished == {"a", "b"}


def test_max_num_seqs_below_one_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_num_seqs=0"):
        _engine(0)


def test_the_wire_stats_report_waiting_requests(tmp_path: Path,
                                                mock_model: Path) -> None:  # noqa: F811
    frontend = Frontend(tmp_path)
    config = {"model": str(mock_model), "mock": True, "max_num_seqs": 2,
              "mock_step_delay_ms": 20}
    group = start_engines(config, frontend.input_address, frontend.output_address)
    try:
        frontend.wait_ready()
        ids = [f"r{i}" for i in range(5)]
        for request_id in ids:
            frontend.add(request_id, [1, 2], max_tokens=6, ignore_eos=True)
        seen: list[tuple[int, int]] = []
        order: list[str] = []
        done: set[str] = set()
        while len(done) < len(ids):
            assert frontend.output.poll(20_000), "the engine stopped sending outputs"
            message = p.OUTPUTS_DECODER.decode(frontend.output.recv())
            assert message.scheduler_stats is not None
            stats = message.scheduler_stats
            seen.append((stats.num_running, stats.num_waiting))
            for out in message.outputs:
                if out.queue_time is not None:
                    order.append(out.request_id)
                if out.finish_reason is not None:
                    done.add(out.request_id)
    finally:
        group.stop(grace_s=2)
        frontend.close()
    assert order == ids, "requests start in arrival order"
    assert max(running for running, _ in seen) == 2
    assert (2, 3) in seen, f"stats never showed 3 waiting behind 2 running: {seen}"
    assert seen[-1] == (0, 0)
