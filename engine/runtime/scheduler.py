"""Continuous batching: which requests run this step, and with how many tokens.

Each step fills a token budget (``max_num_batched_tokens``): running requests first, in
admission order (one decode token each, or the next chunk of a long prompt), then
waiting ones (new or preempted) while there are sequence slots, budget and blocks. A
prompt longer than the remaining budget is chunked across steps. When a running
request needs a block and none is free, a running request is preempted: its blocks are
freed and it goes back to the queue, to be recomputed (its prefix-cached blocks usually
survive and make that cheap). A request that still needs prompt logprobs takes no
prefix-cache hits: it computes every prompt position (as vLLM).

The scheduling policy (``--scheduling-policy``, vLLM's) decides the order:

* ``fcfs`` (the default): the queue is first come, first served; the newest running
  request is preempted, and goes back to the front of the queue;
* ``priority``: the queue is ordered by (priority, arrival time), lower priority values
  first (then the request id, as vLLM breaks ties); the victim of a preemption is the
  running request with the largest (priority, arrival time), even one already scheduled
  this step (its tokens go back to the budget), and it re-enters the queue in that
  order. When the request that needs the block is itself that victim, the running
  requests after it (higher priority) still get their turn.
"""

from __future__ import annotations

import bisect
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from engine.runtime.kv_cache import KVCacheManager
from engine.runtime.request import Request, RequestStatus


@dataclass
class SchedulerOutput:
    """What one step computes: ``num_new_tokens[i]`` tokens of ``requests[i]``."""

    requests: list[Request] = field(default_factory=list)
    num_new_tokens: list[int] = field(default_factory=list)
    preempted: list[Request] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return sum(self.num_new_tokens)

    def __len__(self) -> int:
        return len(self.requests)


def priority_key(request: Request) -> tuple[int, float, str]:
    """The ``priority`` policy's order: lower priority values first, then earlier arrival."""
    return (request.priority, request.arrival_time, request.request_id)


class PriorityQueue:
    """The waiting requests in :func:`priority_key` order, with the deque methods the
    scheduler uses (``appendleft`` inserts in order too: a preempted request has no place
    at the front)."""

    def __init__(self) -> None:
        self._keys: list[tuple[int, float, str]] = []
        self._requests: list[Request] = []

    def append(self, request: Request) -> None:
        key = priority_key(request)
        i = bisect.bisect_right(self._keys, key)
        self._keys.insert(i, key)
        self._requests.insert(i, request)

    appendleft = append

    def popleft(self) -> Request:
        del self._keys[0]
        return self._requests.pop(0)

    def remove(self, request: Request) -> None:
        i = next(i for i, r in enumerate(self._requests) if r is request)
        del self._keys[i]
        del self._requests[i]

    def __getitem__(self, index: int) -> Request:
        return self._requests[index]

    def __len__(self) -> int:
        return len(self._requests)

    def __iter__(self) -> Iterator[Request]:
        return iter(self._requests)


class Scheduler:
    def __init__(
        self,
        kv_cache: KVCacheManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        policy: str = "fcfs",
    ) -> None:
        if policy not in ("fcfs", "priority"):
            raise ValueError(f"unknown scheduling policy {policy!r}; allowed: fcfs, priority")
        self.kv_cache = kv_cache
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.priority = policy == "priority"
        self.waiting: deque[Request] | PriorityQueue = (
            PriorityQueue() if self.priority else deque()
        )
        self.running: list[Request] = []
        self.requests: dict[str, Request] = {}
        self.num_preemptions = 0

    # ------------------------------------------------------------------ queue

    def add_request(self, request: Request) -> None:
        self.requests[request.request_id] = request
        self.waiting.append(request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting)

    def finish_request(self, request: Request, finish_reason: str | None = None) -> None:
        """Drop ``request`` from every queue and return its blocks."""
        if finish_reason is not None:
            request.finish_reason = finish_reason
        if request.status == RequestStatus.RUNNING:
            self.running.remove(request)
        elif request.status == RequestStatus.WAITING:
            self.waiting.remove(request)
        request.status = RequestStatus.FINISHED
        self.kv_cache.free_request(request)
        self.requests.pop(request.request_id, None)

    def finish_requests(self, finished: list[Request]) -> None:
        """Finish several running requests at once (one pass over ``running``)."""
        if not finished:
            return
        done = {id(r) for r in finished}
        self.running = [r for r in self.running if id(r) not in done]
        for request in finished:
            if request.status == RequestStatus.WAITING:
                self.waiting.remove(request)
            request.status = RequestStatus.FINISHED
            self.kv_cache.free_request(request)
            self.requests.pop(request.request_id, None)

    # ------------------------------------------------------------------ schedule

    def _preempt(self, request: Request) -> None:
        self.kv_cache.free_request(request)
        request.reset_for_recompute()
        self.waiting.appendleft(request)
        self.num_preemptions += 1

    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        budget = self.max_num_batched_tokens
        kv = self.kv_cache
        running = self.running

        i = 0
        while i < len(running) and budget > 0:
            request = running[i]
            num_new = min(request.num_tokens - request.num_computed_tokens, budget)
            scheduled = True
            while not kv.allocate_slots(request, num_new):
                if self.priority:
                    victim = max(running, key=priority_key)
                    at = next(j for j, r in enumerate(running) if r is victim)
                    del running[at]
                    if at < i:  # scheduled this step already: its tokens go back
                        k = next(k for k, r in enumerate(out.requests) if r is victim)
                        del out.requests[k]
                        budget += out.num_new_tokens.pop(k)
                        i -= 1
                else:
                    victim = running.pop()
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is request:
                    scheduled = False
                    break
            if not scheduled:
                if self.priority:
                    continue  # it was the lowest: the ones after it may fit now
                break
            out.requests.append(request)
            out.num_new_tokens.append(num_new)
            budget -= num_new
            i += 1

        if out.preempted:
            return out  # blocks are short: admit nothing new this step
        waiting = self.waiting
        while waiting and budget > 0 and len(running) < self.max_num_seqs:
            request = waiting[0]
            # Prompt logprobs need the logits of every prompt position, mean and CLS
            # pooling their hidden states: no cache hits.
            recompute = request.needs_prompt_logprobs or request.pools_every_token
            cached = [] if recompute else kv.find_cached_prefix(request)
            num_cached_tokens = len(cached) * kv.block_size
            num_new = min(request.num_tokens - num_cached_tokens, budget)
            if not kv.allocate_slots(request, num_new, cached):
                break
            waiting.popleft()
            if not recompute:
                kv.record_lookup(request.num_tokens, num_cached_tokens)
            request.num_computed_tokens = num_cached_tokens
            if not request.first_scheduled:
                request.first_scheduled = True
                request.scheduled_at = time.monotonic()
                request.num_cached_tokens = num_cached_tokens
            request.status = RequestStatus.RUNNING
            running.append(request)
            out.requests.append(request)
            out.num_new_tokens.append(num_new)
            budget -= num_new
        return out
