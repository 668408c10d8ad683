"""Reasoning (``--reasoning-parser``): the streaming parser that splits a chat answer into
reasoning and content by its format's start and end markers
(``server/contracts/reasoning_formats.json``), holding back a tail that could begin a
marker, and knows where the reasoning block lies in the text pushed so far
(:meth:`ReasoningParser.side`, for ``server/output/reasoning_tokens.py``). Mirrors
``rust/server/src/parsers/reasoning.rs``. Behaviour: docs/api.md, "Reasoning".
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from server.parsers.markers import TemplateRule, find_any, held_suffix_any, rfind_any


class ReasoningMarkers(msgspec.Struct, frozen=True):
    """The markers of one reasoning format."""

    start: tuple[str, ...]
    end: tuple[str, ...]


class _Format(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    start: tuple[str, ...]
    end: tuple[str, ...]
    source: str


class _Auto(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    template: tuple[TemplateRule, ...]


class _Contract(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    about: str
    formats: tuple[_Format, ...]
    auto: _Auto


# The names, markers and ``auto`` rules are the contract file's, which vrs-rs reads too.
PATH = Path(__file__).resolve().parents[1] / "contracts" / "reasoning_formats.json"
_CONTRACT = msgspec.json.decode(PATH.read_bytes(), type=_Contract)
REASONING_PARSERS = {f.name: ReasoningMarkers(f.start, f.end) for f in _CONTRACT.formats}
# In order: the first rule whose strings all appear in the template wins.
TEMPLATE_RULES = _CONTRACT.auto.template

_BEFORE, _INSIDE, _AFTER = 0, 1, 2


def markers_of(name: str | None) -> ReasoningMarkers | None:
    """The markers of a parser name (None: not a reasoning parser)."""
    return REASONING_PARSERS.get(name) if name is not None else None


def starts_inside(markers: ReasoningMarkers, prompt: str) -> bool:
    """Whether the prompt leaves a reasoning block of ``markers`` open for the answer."""
    return rfind_any(prompt, markers.start) > rfind_any(prompt, markers.end)


class ReasoningParser:
    """Splits streamed text into (reasoning, content) pieces."""

    __slots__ = ("_markers", "_state", "_buffer", "_pushed", "_start", "_end")

    def __init__(self, markers: ReasoningMarkers, inside: bool) -> None:
        self._markers = markers
        self._state = _INSIDE if inside else _BEFORE
        self._buffer = ""
        self._pushed = 0  # characters pushed so far
        # Where the reasoning block begins (its start marker, or 0 when the prompt left it
        # open) and ends (just past its end marker), in the text pushed so far.
        self._start: int | None = 0 if inside else None
        self._end: int | None = None

    def push(self, text: str) -> tuple[str, str]:
        """(reasoning, content) safe to emit now."""
        self._pushed += len(text)
        if self._state == _AFTER:
            return "", text
        buffer = self._buffer + text
        at = self._pushed - len(buffer)  # where ``buffer`` begins in the whole text
        content = ""
        if self._state == _BEFORE:
            found = find_any(buffer, self._markers.start)
            if found is None:
                keep = held_suffix_any(buffer, self._markers.start)
                self._buffer = buffer[len(buffer) - keep:]
                return "", buffer[:len(buffer) - keep]
            start, length = found
            content = buffer[:start]
            buffer = buffer[start + length:]
            self._start = at + start
            at += start + length
            self._state = _INSIDE
        found = find_any(buffer, self._markers.end)
        if found is None:
            keep = held_suffix_any(buffer, self._markers.end)
            self._buffer = buffer[len(buffer) - keep:]
            return buffer[:len(buffer) - keep], content
        end, length = found
        self._state, self._buffer = _AFTER, ""
        self._end = at + end + length
        return buffer[:end], content + buffer[end + length:]

    def side(self, offset: int) -> bool | None:
        """The side of the text at ``offset`` of everything pushed: True inside the
        reasoning block (its markers included), False outside it, None not known yet (held
        back as a possible start marker, or not pushed yet)."""
        if self._end is not None and offset >= self._end:
            return False
        if self._state == _BEFORE:
            return False if offset < self._pushed - len(self._buffer) else None
        if self._start is not None and offset < self._start:
            return False
        if self._state == _INSIDE:
            return True if offset < self._pushed else None
        return True

    def final_side(self, offset: int) -> bool:
        """The side of ``offset`` once the text is over (:meth:`finish`): what is not
        known yet is on the side the parser ended on."""
        side = self.side(offset)
        if side is not None:
            return side
        return (self._state == _INSIDE and self._start is not None
                and offset >= self._start)

    def finish(self) -> tuple[str, str]:
        """Whatever is held back, on the side it was on."""
        buffer, self._buffer = self._buffer, ""
        return (buffer, "") if self._state == _INSIDE else ("", buffer)
