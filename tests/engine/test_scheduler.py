"""Scheduler policy with a fake forward: pure Python, milliseconds."""

from __future__ import annotations

import pytest

from engine import protocol as p
from engine.runtime.kv_cache import KVCacheManager
from engine.runtime.request import Request, RequestStatus
from engine.runtime.scheduler import Scheduler, SchedulerOutput

pytestmark = pytest.mark.unit


def make_request(rid: str, n_prompt: int, max_tokens: int, base: int = 0) -> Request:
    prompt = [base + i for i in range(n_prompt)]
    return Request(rid, prompt, p.SamplingParams(max_tokens=max_tokens), 0.0, frozenset())


def fake_step(sched: Scheduler, out: SchedulerOutput) -> list[Request]:
    """What the engine does after a forward: advance, sample token 7, finish."""
    finished = []
    for req, n in zip(out.requests, out.num_new_tokens, strict=True):
        req.num_computed_tokens += n
        sched.kv_cache.cache_full_blocks(req)
        if req.num_computed_tokens == req.num_tokens and req.append_token(7, 10_000):
            finished.append(req)
    sched.finish_requests(finished)
    return finished


def run(sched: Scheduler, max_steps: int = 10_000) -> list[SchedulerOutput]:
    outs = []
    while sched.has_unfinished_requests():
        out = sched.schedule()
        assert out.requests, "scheduler stalled"
        outs.append(out)
        fake_step(sched, out)
        assert len(outs) < max_steps
    return outs


def test_token_budget_and_chunked_prefill() -> None:
    kv = KVCacheManager(num_blocks=64, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(kv, max_num_seqs=8, max_num_batched_tokens=10)
    long, short = make_request("long", 23, 2), make_request("short", 3, 2, base=100)
    sched.add_request(long)
    sched.add_request(short)
    first = sched.schedule()
    assert [r.request_id for r in first.requests] == ["long"]
    assert first.num_new_tokens == [10]
    fake_step(sched, first)
    second = sched.schedule()  # running first, then the waiting one fills the budget
    assert [r.request_id for r in second.requests] == ["long"]
    assert second.num_new_tokens == [10]
    fake_step(sched, second)
    third = sched.schedule()
    assert [r.request_id for r in third.requests] == ["long", "short"]
    assert third.num_new_tokens == [3, 3]
    outs = [first, second, third] + run(sched)
    assert all(o.total_tokens <= 10 for o in outs)
    assert kv.num_free_blocks == 64


def test_max_num_seqs_caps_the_batch() -> None:
    kv = KVCacheManager(num_blocks=64, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(kv, max_num_seqs=2, max_num_batched_tokens=100)
    for i in range(5):
        sched.add_request(make_request(str(i), 3, 3, base=10 * i))
    outs = run(sched)
    assert max(len(o.requests) for o in outs) == 2
    assert sched.num_running == 0 and sched.num_waiting == 0
    assert kv.num_free_blocks == 64


def test_preempts_newest_running_and_recomputes() -> None:
    # 6 blocks of 2 tokens; three requests of 4 prompt + 4 output tokens need 4 each.
    kv = KVCacheManager(num_blocks=6, block_size=2, enable_prefix_caching=True)
    sched = Scheduler(kv, max_num_seqs=8, max_num_batched_tokens=64)
    reqs = [make_request(str(i), 4, 4, base=10 * i) for i in range(3)]
    for r in reqs:
        sched.add_request(r)
    first = sched.schedule()
    assert len(first.requests) == 3  # 2 blocks each: the pool is full
    fake_step(sched, first)
    second = sched.schedule()  # every request now needs a third block
    assert second.preempted and second.preempted[0] is reqs[2]
    assert reqs[2].status == RequestStatus.WAITING and reqs[2].block_ids == []
    assert sched.waiting[0] is reqs[2]
    assert sched.num_preemptions >= 1
    fake_step(sched, second)
    run(sched)
    for r in reqs:
        assert r.output_token_ids == [7, 7, 7, 7]
    assert kv.num_free_blocks == 6
    # The preempted request's prompt was found again in the prefix cache.
    assert kv.prefix_cache_hits > 0


def test_request_that_fills_the_whole_cache_alone_still_runs() -> None:
    kv = KVCacheManager(num_blocks=4, block_size=2, enable_prefix_caching=False)
    sched = Scheduler(kv, max_num_seqs=4, max_num_batched_tokens=3)
    big = make_request("big", 5, 4)  # 8 tokens = 4 blocks: everything
    small = make_request("small", 3, 2, base=50)
    sched.add_request(big)
    sched.add_request(small)
    run(sched)
    assert big.output_token_ids == [7] * 4 and small.output_token_ids == [7] * 2
    assert kv.num_free_blocks == 4


def test_finish_request_from_any_queue_frees_blocks() -> None:
    kv = KVCacheManager(num_blocks=16, block_size=2, enable_prefix_caching=True)
    sched = Scheduler(kv, max_num_seqs=1, max_num_batched_tokens=100)
    a, b = make_request("a", 5, 3), make_request("b", 5, 3, base=9)
    sched.add_request(a)
    sched.add_request(b)
    fake_step(sched, sched.schedule())
    assert a.status == RequestStatus.RUNNING and b.status == RequestStatus.WAITING
    sched.finish_request(a, "abort")
    sched.finish_request(b, "abort")
    assert not sched.has_unfinished_requests()
    assert kv.num_free_blocks == 16 and a.finish_reason == "abort"
