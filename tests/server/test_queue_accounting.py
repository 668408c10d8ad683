"""The bounded queue's accounting (server/edge/queue.py), without a server: bounds, tickets
that leave once, the 400 of a request that could never fit, deadlines."""

from __future__ import annotations

import time

import pytest

from server.edge.error import APIError, QueueTimeoutError
from server.edge.metrics import Rejection
from server.edge.queue import Queue

pytestmark = pytest.mark.unit


def test_off_without_limits() -> None:
    queue = Queue()
    assert not queue.on
    assert queue.enter([10, 20]) == [None, None]
    assert (queue.reqs, queue.tokens) == (0, 0)


def test_the_request_bound_refuses_with_503_and_tickets_leave_once() -> None:
    queue = Queue(max_reqs=3)
    a = queue.enter([5, 5])
    assert (queue.reqs, queue.tokens) == (2, 10)
    with pytest.raises(APIError) as refused:
        queue.enter([1, 1])
    assert refused.value.status == 503
    assert refused.value.rejection is Rejection.QUEUE_FULL_REQUESTS
    assert (b"retry-after", b"1") in refused.value.headers
    assert "--max-num-queued-reqs" in refused.value.message
    assert (queue.reqs, queue.tokens) == (2, 10), "a refused request takes nothing"
    (b,) = queue.enter([1])
    for ticket in a:
        assert ticket is not None
        ticket.leave()
        ticket.leave()
    assert (queue.reqs, queue.tokens) == (1, 1), "a second leave changes nothing"
    assert b is not None
    b.leave()
    assert (queue.reqs, queue.tokens) == (0, 0)


def test_the_token_bound_counts_prompt_tokens() -> None:
    queue = Queue(max_tokens=100)
    (a,) = queue.enter([60])
    with pytest.raises(APIError) as refused:
        queue.enter([20, 21])
    assert refused.value.rejection is Rejection.QUEUE_FULL_TOKENS
    assert "--max-num-queued-tokens" in refused.value.message
    queue.enter([20, 20])
    assert (queue.reqs, queue.tokens) == (3, 100)
    assert a is not None
    a.leave()
    assert (queue.reqs, queue.tokens) == (2, 40)


def test_a_request_that_could_never_fit_is_a_400() -> None:
    queue = Queue(max_reqs=2, max_tokens=50)
    for sizes, flag in (([1, 1, 1], "--max-num-queued-reqs"), ([51], "--max-num-queued-tokens")):
        with pytest.raises(APIError) as refused:
            queue.enter(sizes)
        assert refused.value.status == 400
        assert refused.value.rejection is None
        assert flag in refused.value.message
    assert (queue.reqs, queue.tokens) == (0, 0)
    with pytest.raises(APIError) as drained:
        Queue(max_tokens=0).enter([1])
    assert drained.value.status == 503, "a bound of 0 refuses every request: a drain switch"


def test_the_wait_limit_sets_each_tickets_deadline() -> None:
    queue = Queue(max_wait=1.5)
    assert queue.on
    before = time.monotonic()
    tickets = queue.enter([4, 4])
    assert (queue.reqs, queue.tokens) == (2, 8)
    for ticket in tickets:
        assert ticket is not None and ticket.deadline is not None
        assert before + 1.5 <= ticket.deadline <= time.monotonic() + 1.5
        error = ticket.timeout_error()
        assert isinstance(error, QueueTimeoutError)
        assert error.status == 503 and error.rejection is Rejection.QUEUE_WAIT_TIMEOUT
        assert "1.5 s" in error.message and "--max-queue-wait" in error.message
