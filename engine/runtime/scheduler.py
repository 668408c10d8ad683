"""Continuous batching: which requests run this step, and with how many tokens.

Each step fills a token budget (``max_num_batched_tokens``): running requests first, in
admission order (one decode token each, or the next chunk of a long prompt), then
waiting ones (new or preempted) while there are sequence slots, budget and blocks. A
prompt longer than the remaining budget is chunked across steps. When a running
request needs a block and none is free, the newest running request is preempted: its
blocks are freed and it goes back to the front of the queue, to be recomputed (its
prefix-cached blocks usually survive and make that cheap). A request that still needs
prompt logprobs takes no prefix-cache hits: it computes every prompt position (as vLLM).
"""

from __future__ import annotations

import time
from collections import deque
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


class Scheduler:
    def __init__(
        self,
        kv_cache: KVCacheManager,
        max_num_seqs: int,
        max_num_batched_tokens: int,
    ) -> None:
        self.kv_cache = kv_cache
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[Request] = deque()
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
                victim = running.pop()
                self._preempt(victim)
                out.preempted.append(victim)
                if victim is request:
                    scheduled = False
                    break
            if not scheduled:
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
            # Prompt logprobs need the logits of every prompt position: no cache hits.
            recompute = request.needs_prompt_logprobs
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
