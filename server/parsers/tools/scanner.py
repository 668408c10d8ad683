"""The pieces every tool-call format's scanner is built from: the deltas, the
:class:`Sink` they are emitted into, and the content scan with marker hold-back.
Mirrors ``rust/server/src/parsers/tools/scanner.rs``.

A :class:`Scanner` is one format's state machine: ``step(buf, final)`` consumes a prefix of
the unconsumed text (emitting through the sink) and returns its length, 0 when it only
changed state, or None to wait for more text (only when not ``final``).
``parallel_tool_calls: false``: the sink drops calls after the first (their text too).
Under a forcing ``tool_choice`` (required, named) it drops all content.
Whitespace after a call is part of its closing syntax: the sink drops the leading
whitespace of the content that follows a closed call.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from server.parsers.markers import held_suffix
from server.parsers.tools.settings import ToolSettings, tool_names

WS = " \t\n\r"  # JSON whitespace: what the formats' syntax allows between tokens


class CallDelta(msgspec.Struct):
    """A piece of call ``index``: ``id`` and ``name`` only on its first delta."""

    index: int
    id: str | None
    name: str | None
    arguments: str


class ToolDelta(msgspec.Struct):
    content: str
    calls: list[CallDelta]


class Sink:
    """What the scanners emit: content, and calls opened, extended and closed."""

    __slots__ = ("names", "parallel", "_forced", "_new_id", "_content", "_calls", "_open",
                 "_dropped", "_after_call", "calls_made")

    def __init__(self, settings: ToolSettings, new_id: Callable[[], str]) -> None:
        self.names = tool_names(settings)
        self.parallel = settings.parallel
        # A forcing tool_choice (required, named): the output is calls only, as in vLLM;
        # text that is no call (one cut by max_tokens before it started) is never content.
        self._forced = settings.mode in ("required", "named")
        self._new_id = new_id
        self._content: list[str] = []
        self._calls: list[CallDelta] = []
        self._open = False  # a call is taking arguments
        self._dropped = False  # ... and it is dropped (parallel_tool_calls false)
        self._after_call = False  # a call ended and no content came since
        self.calls_made = 0

    def content(self, text: str) -> None:
        if self._forced:
            return
        if self._after_call:  # whitespace after a call is part of its closing syntax
            text = text.lstrip(WS)
            self._after_call = not text
        if text:
            self._content.append(text)

    def open(self, name: str, arguments: str = "") -> None:
        self._open = True
        self._dropped = bool(self.calls_made) and not self.parallel
        if not self._dropped:
            self._calls.append(CallDelta(self.calls_made, self._new_id(), name, arguments))
            self.calls_made += 1

    def args(self, text: str) -> None:
        if not text or self._dropped or not self._open:
            return
        last = self._calls[-1] if self._calls else None
        if last is not None and last.index == self.calls_made - 1:
            last.arguments += text
        else:
            self._calls.append(CallDelta(self.calls_made - 1, None, None, text))

    def close(self) -> None:
        self._after_call = self._after_call or self._open
        self._open = self._dropped = False

    def take(self) -> ToolDelta:
        delta = ToolDelta("".join(self._content), self._calls)
        self._content, self._calls = [], []
        return delta


class Scanner:
    """One format's state machine (see the module docstring)."""

    def __init__(self, sink: Sink, settings: ToolSettings) -> None:
        self.sink = sink
        self.settings = settings

    def step(self, buf: str, final: bool) -> int | None:
        raise NotImplementedError


def scan_content(sink: Sink, buf: str, marker: str, final: bool) -> tuple[int | None, bool]:
    """Content up to ``marker``: (consumed or None to wait, whether the marker is at
    ``buf[consumed:]``). A partial marker at the end is held unless ``final``."""
    at = buf.find(marker)
    if at == -1:
        keep = 0 if final else held_suffix(buf, marker)
        sink.content(buf[:len(buf) - keep])
        return (len(buf) - keep) or (0 if final else None), False
    sink.content(buf[:at])
    return at, True


def is_partial(buf: str, token: str) -> bool:
    """Whether ``buf`` is a proper prefix of ``token`` (wait for more)."""
    return len(buf) < len(token) and token.startswith(buf)
