"""A chat choice's reasoning tokens: each generated token placed by where its text begins
(``Piece.token_offsets``) against the reasoning parser's block; a token the parser cannot
place yet (its text held back as a possible marker, or not pushed yet) waits for a later
piece, or for the end. Mirrors ``rust/server/src/output/reasoning_tokens.rs``.
Behaviour: docs/api.md, "Reasoning".
"""

from __future__ import annotations

from collections import deque

from server.parsers.reasoning import ReasoningParser


class ReasoningTokens:
    """The count so far, and the tokens not placed yet (offsets in increasing order)."""

    __slots__ = ("_waiting", "total")

    def __init__(self) -> None:
        self._waiting: deque[int] = deque()
        self.total = 0

    def count(self, parser: ReasoningParser, offsets: list[int], last: bool) -> None:
        """Adds a piece's token ``offsets`` after ``parser`` took its text; ``last``: the
        text is over (after ``parser.finish()``), so every token is placed."""
        waiting = self._waiting
        waiting.extend(offsets)
        while waiting:
            offset = waiting[0]
            inside = parser.final_side(offset) if last else parser.side(offset)
            if inside is None:
                break
            self.total += inside
            waiting.popleft()
