"""A chat choice's reasoning tokens (``usage.completion_tokens_details.reasoning_tokens``,
the Responses API's ``output_tokens_details.reasoning_tokens``): the generated tokens whose
text begins inside the reasoning block, its start and end markers included (when the
prompt leaves the block open, from the first token on). So a choice's completion tokens
are its reasoning tokens plus the tokens of its answer (content, tool calls). Mirrors
``rust/server/src/output/reasoning_tokens.rs``.

A token's place is where its text begins in the generation's text
(``Piece.token_offsets``); a token the reasoning parser cannot place yet (its text is held
back as a possible marker, or not pushed yet) waits for a later piece, or for the end.
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
