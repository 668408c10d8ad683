"""Step coalescing (engine/process/coalesce.py): the rules, and that nothing is lost over
the wire."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import zmq

from engine import protocol as p
from engine.mock.engine import MockEngine
from engine.process.coalesce import StepResult, coalesce
from engine.process.core import EngineCore

pytestmark = pytest.mark.server


def _lp(token: int) -> p.TokenLogprobs:
    return p.TokenLogprobs(token, -0.5, 1, [token], [-0.5])


def _step(
    outputs: list[p.EngineCoreOutput],
    running: int,
    at: float,
    utility: p.UtilityOutput | None = None,
) -> StepResult:
    return StepResult(outputs, p.SchedulerStats(num_running=running), at, utility)


def test_one_step_is_one_message_unchanged() -> None:
    out = p.EngineCoreOutput("a", [5], num_cached_tokens=3)
    [message] = coalesce([_step([out], 1, 1.0)], engine_index=2)
    assert message.engine_index == 2
    assert message.outputs == [p.EngineCoreOutput("a", [5], num_cached_tokens=3)]
    assert message.timestamp == 1.0 and message.scheduler_stats.num_running == 1
    assert message.utility_output is None


def test_a_requests_steps_merge_in_order_with_the_last_finish() -> None:
    steps = [
        _step(
            [p.EngineCoreOutput("a", [1], new_logprobs=[_lp(1)]), p.EngineCoreOutput("b", [7])],
            2,
            1.0,
        ),
        _step(
            [
                p.EngineCoreOutput("a", [2], new_logprobs=[_lp(2)]),
                p.EngineCoreOutput("b", [8], "stop", 8),
            ],
            2,
            2.0,
        ),
        _step([p.EngineCoreOutput("a", [3], "length", new_logprobs=[_lp(3)])], 1, 3.0),
    ]
    [message] = coalesce(steps, engine_index=0)
    a, b = message.outputs
    assert (a.request_id, a.new_token_ids, a.finish_reason) == ("a", [1, 2, 3], "length")
    assert [lp.token_id for lp in a.new_logprobs] == [1, 2, 3]
    assert (b.new_token_ids, b.finish_reason, b.stop_token_id) == ([7, 8], "stop", 8)
    # Stats and timestamp are the newest the message carries.
    assert message.timestamp == 3.0 and message.scheduler_stats.num_running == 1


def test_the_first_outputs_prompt_logprobs_and_timings_survive_merging() -> None:
    prompt = [p.TokenLogprobs(9, -1.25, 3, [4], [-0.5])]
    first = p.EngineCoreOutput("a", [1], prompt_logprobs=prompt, queue_time=0.25, prefill_time=0.5)
    steps = [
        _step([first], 1, 1.0),
        _step([p.EngineCoreOutput("a", [2])], 1, 2.0),
        _step([p.EngineCoreOutput("a", [3], "length")], 0, 3.0),
    ]
    [message] = coalesce(steps, engine_index=0)
    [a] = message.outputs
    assert a.new_token_ids == [1, 2, 3] and a.finish_reason == "length"
    assert a.prompt_logprobs == prompt and (a.queue_time, a.prefill_time) == (0.25, 0.5)


def test_an_error_or_abort_after_tokens_keeps_the_tokens() -> None:
    steps = [
        _step([p.EngineCoreOutput("a", [1]), p.EngineCoreOutput("b", [4])], 2, 1.0),
        _step(
            [
                p.EngineCoreOutput("a", [], "error", error_message="boom",
                                   error_kind="invalid_request"),
                p.EngineCoreOutput("b", [], "abort", num_cached_tokens=16),
            ],
            0,
            2.0,
        ),
    ]
    [message] = coalesce(steps, engine_index=0)
    a, b = message.outputs
    assert (a.new_token_ids, a.finish_reason, a.error_message) == ([1], "error", "boom")
    assert a.error_kind == "invalid_request"
    assert (b.new_token_ids, b.finish_reason, b.num_cached_tokens) == ([4], "abort", 16)


def test_a_pooling_answer_survives_merging() -> None:
    steps = [
        _step([p.EngineCoreOutput("a", [], queue_time=0.5)], 1, 1.0),
        _step([p.EngineCoreOutput("a", [], "stop", pooling_output=[0.25, -1.0])], 0, 2.0),
    ]
    [message] = coalesce(steps, engine_index=0)
    [a] = message.outputs
    assert (a.finish_reason, a.pooling_output, a.queue_time) == ("stop", [0.25, -1.0], 0.5)


def test_a_utility_answer_never_overtakes_earlier_outputs() -> None:
    pong = p.UtilityOutput(call_id=9, success=True, result="pong")
    steps = [
        _step([p.EngineCoreOutput("a", [1])], 1, 1.0),
        _step([p.EngineCoreOutput("a", [2])], 1, 2.0, utility=pong),
        _step([p.EngineCoreOutput("a", [3])], 1, 3.0),
        _step([], 1, 4.0, utility=p.UtilityOutput(call_id=10, success=True, result=1)),
    ]
    first, second = coalesce(steps, engine_index=0)
    assert first.outputs[0].new_token_ids == [1, 2] and first.utility_output == pong
    assert second.outputs[0].new_token_ids == [3] and second.utility_output.call_id == 10
    assert second.timestamp == 4.0


def test_a_reused_request_id_is_never_merged_into_the_finished_one() -> None:
    steps = [
        _step([p.EngineCoreOutput("a", [1], "length")], 0, 1.0),
        _step([p.EngineCoreOutput("a", [9])], 1, 2.0),
    ]
    first, second = coalesce(steps, engine_index=0)
    assert first.outputs == [p.EngineCoreOutput("a", [1], "length")]
    assert second.outputs == [p.EngineCoreOutput("a", [9])]


class _Wire:
    """EngineCore around ``model`` on ipc:// sockets, the frontend's side in the test."""

    def __init__(self, model: MockEngine, tmp_path: Path) -> None:
        self.ctx = zmq.Context()
        self.router, self.pull = self.ctx.socket(zmq.ROUTER), self.ctx.socket(zmq.PULL)
        self.router.bind(f"ipc://{tmp_path}/in")
        self.pull.bind(f"ipc://{tmp_path}/out")
        self.dealer, self.push = self.ctx.socket(zmq.DEALER), self.ctx.socket(zmq.PUSH)
        self.dealer.setsockopt(zmq.IDENTITY, p.engine_identity(0))
        self.dealer.connect(f"ipc://{tmp_path}/in")
        self.push.connect(f"ipc://{tmp_path}/out")
        self.dealer.send(b"hello")
        self.identity, _ = self.router.recv_multipart()
        self.core = EngineCore(model, 0, self.dealer, self.push)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.loop = threading.Thread(target=self._run, daemon=True)
        self.loop.start()

    def _run(self) -> None:
        try:
            self.core.run_busy_loop(self.stop)
        except BaseException as exc:  # what the engine process would die of
            self.error = exc

    def send(self, kind: p.RequestType, message: object) -> None:
        self.router.send_multipart([self.identity, bytes([kind]), p.encode(message)])

    def close(self) -> None:
        self.stop.set()
        self.loop.join(10)
        for sock in (self.router, self.pull, self.dealer, self.push):
            sock.close(linger=0)
        self.ctx.term()


def test_every_token_arrives_in_order_through_the_real_loop(tmp_path: Path) -> None:
    """The mock behind EngineCore on ipc:// sockets, 48 requests at once: whatever the
    output thread merged, each request's tokens are exactly what the mock makes alone."""
    model = MockEngine("m", vocab_size=5000, eos_token_ids=[2], max_model_len=4096, seed=7)
    requests = [
        p.EngineCoreRequest(
            f"r{i}",
            [11] * (i + 1),
            p.SamplingParams(max_tokens=20 + i, seed=i, ignore_eos=True),
            time.time(),
        )
        for i in range(48)
    ]
    expected: dict[str, list[int]] = {}
    reference = MockEngine("m", vocab_size=5000, eos_token_ids=[2], max_model_len=4096, seed=7)
    for request in requests:
        reference.add_request(request)
    while reference.has_unfinished_requests():
        for out in reference.step():
            expected.setdefault(out.request_id, []).extend(out.new_token_ids)

    wire = _Wire(model, tmp_path)
    try:
        for request in requests:
            wire.send(p.RequestType.ADD, request)
        got: dict[str, list[int]] = {}
        finished: set[str] = set()
        while len(finished) < len(requests):
            assert wire.pull.poll(10_000), "the engine stopped sending"
            message = p.OUTPUTS_DECODER.decode(wire.pull.recv())
            for out in message.outputs:
                assert out.request_id not in finished, "output after the finish"
                got.setdefault(out.request_id, []).extend(out.new_token_ids)
                if out.finish_reason is not None:
                    assert out.finish_reason == "length"
                    finished.add(out.request_id)
        assert got == expected
    finally:
        wire.close()
    assert wire.error is None


class _OddUtility(MockEngine):
    def utility(self, method: str, args: list[object]) -> object:
        if method == "odd":
            return object()  # msgpack cannot carry it
        return super().utility(method, args)


def test_an_output_that_cannot_be_sent_is_fatal_not_a_hang(tmp_path: Path) -> None:
    model = _OddUtility("m", vocab_size=5000, eos_token_ids=[2], max_model_len=4096)
    wire = _Wire(model, tmp_path)
    try:
        wire.send(p.RequestType.UTILITY, p.UtilityRequest(call_id=1, method="ping"))
        assert wire.pull.poll(10_000)
        assert p.OUTPUTS_DECODER.decode(wire.pull.recv()).utility_output.result == "pong"
        wire.send(p.RequestType.UTILITY, p.UtilityRequest(call_id=2, method="odd"))
        wire.loop.join(10)
        assert not wire.loop.is_alive(), "the busy loop must stop"
        assert isinstance(wire.error, TypeError), wire.error
    finally:
        wire.close()
