"""Data parallel balancing: which engine takes the next request (as
``rust/engine-client/src/balance.rs``).

An engine's load is what it last reported (running + waiting, from the ``SchedulerStats``
on the wire) plus the requests this frontend has in flight there; the in-flight count
moves with every request, so a burst spreads before any stats arrive. Ties rotate.
"""

from __future__ import annotations

from engine import protocol as p


def least_loaded(in_flight: dict[bytes, int], stats: dict[int, p.SchedulerStats],
                 turn: int) -> bytes:
    """The identity (engine index, 2 bytes LE) of the least-loaded engine; among equals
    the first at or after position ``turn % len(in_flight)``."""
    identities = list(in_flight)
    if not identities:
        raise ValueError("no engine to route to")
    start = turn % len(identities)
    order = identities[start:] + identities[:start]

    def score(identity: bytes) -> int:
        reported = stats.get(int.from_bytes(identity, "little"))
        queued = 0 if reported is None else reported.num_running + reported.num_waiting
        return in_flight[identity] + queued

    return min(order, key=score)
