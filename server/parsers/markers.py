"""Marker hold-back for streaming parsers (tool calls, reasoning).

A parser that looks for a marker such as ``<think>`` in streamed text must not emit the
tail of a piece that could be the start of the marker completed by the next piece.
Mirrors ``rust/server/src/parsers/markers.rs``. Also the ``auto`` rule of both parser
contract files (``server/contracts/{tool,reasoning}_formats.json``).
"""

from __future__ import annotations

import msgspec


class TemplateRule(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """``auto``: a chat template holding every string of ``all`` picks ``parser``."""

    all: tuple[str, ...]
    parser: str


def held_suffix(text: str, marker: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``marker``."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


def held_suffix_any(text: str, markers: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of any of ``markers``."""
    return max((held_suffix(text, m) for m in markers), default=0)


def find_any(text: str, markers: tuple[str, ...]) -> tuple[int, int] | None:
    """The earliest whole occurrence of any of ``markers``: (offset, marker length); at the
    same offset the longer marker wins."""
    found = [(at, -len(m)) for m in markers if (at := text.find(m)) != -1]
    if not found:
        return None
    at, negative = min(found)
    return at, -negative


def rfind_any(text: str, markers: tuple[str, ...]) -> int:
    """The offset of the last whole occurrence of any of ``markers`` (-1: none)."""
    return max((text.rfind(m) for m in markers), default=-1)
