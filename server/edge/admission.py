"""Admission: generation requests in flight (what ``/load`` reports), bounded by
``--max-concurrent-requests``; over the bound a request is refused with 429 and
``Retry-After`` instead of queueing. Rust: rust/server/src/edge/admission.rs."""

from __future__ import annotations

from server.edge.error import RETRY_AFTER, APIError, ErrorKind
from server.edge.metrics import Metrics, Rejection


class Admission:
    """The generation requests in flight, ``limit`` at most (None: no limit)."""

    def __init__(self, limit: int | None, metrics: Metrics) -> None:
        self.limit = limit
        self.metrics = metrics
        self.active = 0

    def admit(self) -> None:
        """Count a request in (429 when ``limit`` are in flight); :meth:`release` it when
        it is over."""
        limit = self.limit
        if limit is not None and self.active >= limit:
            self.metrics.reject(Rejection.MAX_CONCURRENT_REQUESTS)
            raise APIError(ErrorKind.TOO_MANY_REQUESTS,
                           f"the server is at its limit of {limit} concurrent requests; "
                           "retry later", headers=[RETRY_AFTER])
        self.active += 1

    def release(self) -> None:
        self.active -= 1
