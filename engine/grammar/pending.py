"""PendingGrammars: the requests that wait for their grammar before they are scheduled.

A constrained request whose grammar is not compiled yet is held here (it counts as
waiting) instead of entering the scheduler. Each step the engine takes out the ready ones
(with a fresh matcher) and the failed ones (a GrammarError: the request ends with an
``invalid_request`` error), so a slow compile never blocks the others.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, wait
from typing import Generic, TypeVar

from engine.grammar.bitmask import Matcher
from engine.grammar.compiler import GrammarJob
from engine.grammar.errors import GrammarError

T = TypeVar("T")


class PendingGrammars(Generic[T]):
    def __init__(self) -> None:
        self._jobs: dict[str, tuple[T, GrammarJob]] = {}

    def __len__(self) -> int:
        return len(self._jobs)

    def __contains__(self, request_id: str) -> bool:
        return request_id in self._jobs

    def add(self, request_id: str, request: T, job: GrammarJob) -> None:
        self._jobs[request_id] = (request, job)

    def pop(self, request_id: str) -> T | None:
        entry = self._jobs.pop(request_id, None)
        return None if entry is None else entry[0]

    def take(self) -> tuple[list[tuple[T, Matcher]], list[tuple[T, str]]]:
        """(request, matcher) for each grammar now compiled, and (request, message) for
        each that failed or ran out of time; both leave the waiting set, in arrival order."""
        ready: list[tuple[T, Matcher]] = []
        failed: list[tuple[T, str]] = []
        for request_id, (request, job) in list(self._jobs.items()):
            try:
                compiled = job.result()
            except GrammarError as exc:
                failed.append((request, str(exc)))
            else:
                if compiled is None:
                    continue
                ready.append((request, Matcher(compiled)))
            del self._jobs[request_id]
        return ready, failed

    def wait(self, timeout_s: float) -> None:
        """Block until some compile finishes (or ``timeout_s``): the engine's idle wait
        while every request it has waits for a grammar."""
        futures = [job.future for _, job in self._jobs.values()]
        if futures:
            wait(futures, timeout=timeout_s, return_when=FIRST_COMPLETED)
