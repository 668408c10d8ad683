"""Marker hold-back for streaming parsers (tool calls, reasoning).

A parser that looks for a marker such as ``<think>`` in streamed text must not emit the
tail of a piece that could be the start of the marker completed by the next piece.
Mirrors ``rust/server/src/parsers/markers.rs``.
"""

from __future__ import annotations


def held_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0
