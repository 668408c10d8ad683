"""``--scheduling-policy priority`` in the scheduler (vLLM's rule): the queue in
(priority, arrival) order, the lowest-priority running request preempted first (even one
already scheduled this step), and fcfs as before; with a fake forward, milliseconds."""

from __future__ import annotations

import pytest

from engine import protocol as p
from engine.runtime.kv_cache import KVCacheManager
from engine.runtime.request import Request
from engine.runtime.scheduler import Scheduler
from tests.engine.test_scheduler import fake_step, run

pytestmark = pytest.mark.unit


def request(rid: str, n_prompt: int, priority: int, arrival: float = 0.0,
            max_tokens: int = 3) -> Request:
    prompt = [10 * len(rid) + i for i in range(n_prompt)]
    return Request(rid, prompt, p.SamplingParams(max_tokens=max_tokens), arrival,
                   frozenset(), priority=priority)


@pytest.mark.parametrize("policy, order", [
    ("priority", ["b", "c", "d", "a"]),  # lower first, then earlier arrival
    ("fcfs", ["a", "b", "c", "d"]),  # first come, first served: priority is not read
])
def test_the_queue_order(policy: str, order: list[str]) -> None:
    kv = KVCacheManager(num_blocks=64, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(kv, max_num_seqs=1, max_num_batched_tokens=64, policy=policy)
    for rid, level, arrival in (("a", 2, 1.0), ("b", -1, 3.0), ("c", -1, 4.0), ("d", 0, 0.5)):
        sched.add_request(request(rid, 3, level, arrival))
    started = []
    for out in run(sched):
        started += [r.request_id for r in out.requests if r.request_id not in started]
    assert started == order


def two_running(policy: str) -> tuple[Scheduler, Request, Request]:
    """``low`` (priority 9) then ``high`` (priority 0) running, every block in use, and
    ``high`` about to need a block that only ``low``'s can give."""
    kv = KVCacheManager(num_blocks=3, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(kv, max_num_seqs=4, max_num_batched_tokens=64, policy=policy)
    low, high = request("low", 4, 9, max_tokens=6), request("high", 4, 0, max_tokens=6)
    sched.add_request(low)
    fake_step(sched, sched.schedule())  # low: 5 tokens, 1 block
    sched.add_request(high)
    out = sched.schedule()  # low takes its 2nd block, high its 1st: none left
    assert [r.request_id for r in out.requests] == ["low", "high"]
    assert kv.num_free_blocks == 0
    fake_step(sched, out)  # high: 5 tokens, needs its 2nd block next
    return sched, low, high


def test_priority_preempts_the_lowest_even_if_already_scheduled_this_step() -> None:
    sched, low, high = two_running("priority")
    out = sched.schedule()
    # low went first (running order) and fit; high needed a block: low, the lowest
    # priority, is preempted and its scheduled token returned to the budget.
    assert out.requests == [high] and out.num_new_tokens == [1]
    assert out.preempted == [low]
    assert list(sched.waiting) == [low] and sched.running == [high]
    run(sched)  # both still finish
    assert low.num_output_tokens == 6 and high.num_output_tokens == 6


def test_fcfs_preempts_the_newest() -> None:
    sched, low, high = two_running("fcfs")
    out = sched.schedule()
    assert out.requests == [low] and out.preempted == [high]


@pytest.mark.parametrize("policy, scheduled, preempted", [
    ("priority", "high", "low"),  # low is the lowest: it goes, high still runs this step
    ("fcfs", "low", "high"),  # the newest goes, and low takes its block
])
def test_the_request_short_of_a_block_may_be_the_victim(policy: str, scheduled: str,
                                                        preempted: str) -> None:
    kv = KVCacheManager(num_blocks=2, block_size=4, enable_prefix_caching=False)
    sched = Scheduler(kv, max_num_seqs=4, max_num_batched_tokens=64, policy=policy)
    low, high = request("low", 3, 9, max_tokens=5), request("high", 3, 0, max_tokens=5)
    sched.add_request(low)
    fake_step(sched, sched.schedule())  # low: 4 tokens in its 1 block
    sched.add_request(high)
    fake_step(sched, sched.schedule())  # high takes the last block; low: 5 tokens
    out = sched.schedule()  # running [low, high]: low needs a 2nd block
    assert [r.request_id for r in out.requests] == [scheduled]
    assert [r.request_id for r in out.preempted] == [preempted]
    run(sched)
    assert low.num_output_tokens == 5 and high.num_output_tokens == 5


def test_a_preempted_request_waits_in_priority_order() -> None:
    sched, low, high = two_running("priority")
    early = request("early", 3, 5, arrival=-1.0)
    sched.add_request(early)
    sched.schedule()  # low preempted: the queue holds it after "early" (priority 5 < 9)
    assert [r.request_id for r in sched.waiting] == ["early", "low"]
