"""The streaming tool-call parser: ``push(text) -> ToolDelta`` per generated piece and
``finish() -> ToolDelta`` at the end of the output, over one format's
:class:`~server.parsers.tools.scanner.Scanner` (:func:`make_scanner`). The non-streamed
answer accumulates the same deltas (:class:`CallAccumulator`), so stream and non-stream
agree, bad output included. Mirrors ``rust/server/src/parsers/tools/parser.rs``.
Behaviour: docs/api.md, "Tool calls".
"""

from __future__ import annotations

import secrets
import string
import uuid

import msgspec

from server.parsers.tools import json_formats, pythonic, qwen3_coder
from server.parsers.tools.formats import forces_natively
from server.parsers.tools.scanner import CallDelta, Scanner, Sink, ToolDelta
from server.parsers.tools.settings import ToolSettings


class ToolCall(msgspec.Struct):
    id: str
    name: str
    arguments: str


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


_ALNUM = string.ascii_letters + string.digits


def mistral_call_id() -> str:
    return "".join(secrets.choice(_ALNUM) for _ in range(9))


def make_scanner(parser: str, settings: ToolSettings, sink: Sink) -> Scanner:
    """The scanner of ``parser``'s format; under forcing without a native format, the
    forced-JSON parser."""
    if settings.mode in ("required", "named") and not forces_natively(parser):
        return json_formats.forced_json(sink, settings)
    if parser == "qwen3_coder":
        return qwen3_coder.Qwen3Coder(sink, settings)
    if parser == "pythonic":
        return pythonic.Pythonic(sink, settings)
    return json_formats.scanner(parser, sink, settings)


class ToolCallParser:
    """Splits streamed text into content and tool-call deltas (see the module docstring)."""

    __slots__ = ("_buf", "_sink", "_scanner")

    def __init__(self, parser: str, settings: ToolSettings) -> None:
        new_id = mistral_call_id if parser == "mistral" else new_call_id
        self._buf = ""
        self._sink = Sink(settings, new_id)
        self._scanner = make_scanner(parser, settings, self._sink)

    @property
    def calls_made(self) -> int:
        return self._sink.calls_made

    def push(self, text: str) -> ToolDelta:
        self._buf += text
        self._run(False)
        return self._sink.take()

    def finish(self) -> ToolDelta:
        self._run(True)
        self._sink.close()
        return self._sink.take()

    def _run(self, final: bool) -> None:
        scanner, buf = self._scanner, self._buf
        idle = 0
        while buf:
            used = scanner.step(buf, final)
            if used is None:
                if final:  # a scanner that cannot decide at the end: the text is content
                    self._sink.content(buf)
                    buf = ""
                break
            buf = buf[used:]
            idle = idle + 1 if used == 0 else 0
            if idle > 16:  # a scanner bug: never an error for the client, the text is content
                self._sink.content(buf)
                buf = ""
        self._buf = buf


class CallAccumulator:
    """The non-streamed calls: the deltas concatenated per index."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[ToolCall] = []

    def add(self, deltas: list[CallDelta]) -> None:
        for delta in deltas:
            if delta.index == len(self.calls):
                self.calls.append(ToolCall(delta.id or "", delta.name or "", delta.arguments))
            else:
                self.calls[delta.index].arguments += delta.arguments
