"""The mock engine honours the request fields a frontend can see it honour: ``priority``
(with ``scheduling_policy`` priority, the queue in (priority, arrival) order) and
``thinking_budget`` (the end marker forced at the budget; ahead of a scripted reply in
tests/server/test_engine_fields_http.py);
a budget it cannot honour ends the request with an error, as in the real engine."""

from __future__ import annotations

import pytest

from engine import protocol as p
from engine.mock.engine import MockEngine

pytestmark = pytest.mark.unit

EOS = 2


def _engine(policy: str = "fcfs", max_num_seqs: int = 1) -> MockEngine:
    return MockEngine("m", vocab_size=5000, eos_token_ids=[EOS], max_model_len=4096, seed=1,
                      max_num_seqs=max_num_seqs, scheduling_policy=policy)


def _run(engine: MockEngine) -> tuple[list[str], dict[str, list[int]]]:
    """Steps until done: the order requests started in, and each one's tokens."""
    started: list[str] = []
    tokens: dict[str, list[int]] = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.request_id not in tokens:
                started.append(out.request_id)
            tokens.setdefault(out.request_id, []).extend(out.new_token_ids)
    return started, tokens


@pytest.mark.parametrize("policy, order", [
    ("priority", ["run", "c", "b", "d", "a"]),
    ("fcfs", ["run", "a", "b", "c", "d"]),
])
def test_the_queue_follows_the_policy(policy: str, order: list[str]) -> None:
    engine = _engine(policy)
    params = p.SamplingParams(max_tokens=3, ignore_eos=True)
    engine.add_request(p.EngineCoreRequest("run", [5], params, 0.0, priority=9))
    engine.step()  # "run" holds the one slot; the others queue behind it
    for rid, level, arrival in (("a", 3, 1.0), ("b", 0, 2.0), ("c", -4, 3.0), ("d", 0, 4.0)):
        engine.add_request(p.EngineCoreRequest(rid, [5], params, arrival, priority=level))
    assert _run(engine)[0] == order
    # An aborted waiting request leaves the priority queue too.
    engine.add_request(p.EngineCoreRequest("x", [5], params, 0.0))
    engine.add_request(p.EngineCoreRequest("y", [5], params, 1.0, priority=-1))
    engine.add_request(p.EngineCoreRequest("z", [5], params, 2.0, priority=-2))
    engine.abort_requests(["z"])
    assert _run(engine)[0] == (["y", "x"] if policy == "priority" else ["x", "y"])


def test_the_end_marker_is_forced_at_the_budget() -> None:
    start, end = [700], [701, 702]
    engine = _engine()
    budget = p.ThinkingBudget(budget=2, start_token_ids=[start], end_token_ids=[end])
    params = p.SamplingParams(max_tokens=8, ignore_eos=True, thinking_budget=budget)
    engine.add_request(p.EngineCoreRequest("t", [5, *start, 6], params, 0.0))
    tokens = _run(engine)[1]["t"]
    # The prompt's one thinking token and one generated token spend the budget of 2.
    assert tokens[1:3] == end and end[0] not in tokens[:1]
    assert len(tokens) == 8


def test_a_budget_it_cannot_honour_is_an_error() -> None:
    engine = _engine()
    budget = p.ThinkingBudget(budget=2, start_token_ids=[[9000]], end_token_ids=[[1]])
    params = p.SamplingParams(max_tokens=8, thinking_budget=budget)
    (out,) = engine.add_request(p.EngineCoreRequest("bad", [5], params, 0.0))
    assert out.finish_reason == "error" and "token id 9000" in (out.error_message or "")
