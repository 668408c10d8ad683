"""The Python frontend's data parallel choice (server/engine_client/balance.py), the same rule as
rust/engine-client/src/balance.rs."""

from __future__ import annotations

import pytest

from engine import protocol as p
from server.engine_client.balance import least_loaded

pytestmark = pytest.mark.unit

E0, E1, E2 = (p.engine_identity(i) for i in range(3))


def stats(running: int, waiting: int) -> p.SchedulerStats:
    return p.SchedulerStats(num_running=running, num_waiting=waiting)


def test_no_engine_is_an_error() -> None:
    with pytest.raises(ValueError):
        least_loaded({}, {}, 0)


def test_in_flight_plus_reported_queue() -> None:
    in_flight = {E0: 4, E1: 2, E2: 3}
    assert least_loaded(in_flight, {}, 0) == E1
    # Engine 1 reports a queue the frontend did not send: engine 2 wins.
    assert least_loaded(in_flight, {1: stats(0, 5)}, 0) == E2
    assert least_loaded(in_flight, {1: stats(3, 0), 2: stats(0, 2)}, 0) == E0


def test_ties_rotate_and_bursts_spread() -> None:
    in_flight = {E0: 0, E1: 0, E2: 0}
    assert [least_loaded(in_flight, {}, t) for t in range(4)] == [E0, E1, E2, E0]
    for turn in range(9):
        in_flight[least_loaded(in_flight, {}, turn)] += 1
    assert list(in_flight.values()) == [3, 3, 3]
