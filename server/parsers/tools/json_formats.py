"""The JSON-body tool-call formats (``demo``, ``hermes``, ``llama3_json``, ``mistral``,
``deepseek_v3``, ``granite``) and the forced-JSON parser of format-independent forcing, as
one scanner (:class:`JsonCalls`) with a head per format that reads its wrapper syntax up to
the call body (:mod:`server.parsers.tools.json_call`); markers from
:mod:`server.parsers.tools.formats`. Rust: ``pre`` and ``close`` in
rust/server/src/parsers/tools/formats.rs. Behaviour: docs/api.md, "Tool calls".
"""

from __future__ import annotations

from collections.abc import Callable

from server.parsers.tools import formats as f
from server.parsers.tools.formats import call_prefix
from server.parsers.tools.json_call import (
    NEED,
    Commit,
    Head,
    Need,
    ObjectScanner,
    Reject,
    StringDecoder,
    Whole,
    body_head,
    skip_ws,
)
from server.parsers.tools.scanner import Scanner, Sink, is_partial, scan_content
from server.parsers.tools.settings import ToolSettings

CONTENT, PENDING, OBJECT, STRING, CLOSE, ALL = range(6)
DS_CALL_BEGIN, DS_CALL_END = f.DEEPSEEK_CALL_BEGIN, f.DEEPSEEK_CALL_END
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")

HeadReader = Callable[[str, bool], Head]


def _expect(buf: str, i: int, token: str, final: bool) -> int | Head:
    """The index after ``token`` at ``buf[i]``, or NEED / a Reject."""
    if buf.startswith(token, i):
        return i + len(token)
    if is_partial(buf[i:], token):
        return Reject(len(buf)) if final else NEED
    return Reject(i)


class JsonCalls(Scanner):
    """One JSON-body format (see the module docstring)."""

    def __init__(self, sink: Sink, settings: ToolSettings, marker: str | None,
                 first: str, *, after: tuple[str, ...] = (), more: tuple[str, ...] = (),
                 end: tuple[str, ...] = ()) -> None:
        super().__init__(sink, settings)
        self.marker = marker
        self.rest = CONTENT if marker is not None else ALL  # after a call list / bad output
        self.state = CONTENT if marker is not None else PENDING
        self._first = first
        self.head: HeadReader = getattr(self, first)
        self.marker_len = 0
        self.after, self.more, self.end = after, more, end
        self.tokens: list[str] = []
        self._object = ObjectScanner()
        self._string = StringDecoder()

    def step(self, buf: str, final: bool) -> int | None:
        state, sink = self.state, self.sink
        if state == ALL:
            sink.content(buf)
            return len(buf)
        if state == CONTENT:
            used, found = scan_content(sink, buf, self.marker or "", final)
            if found:
                self.state, self.head = PENDING, getattr(self, self._first)
                self.marker_len = len(self.marker or "")
            return used
        if state == PENDING:
            return self._pending(buf, final)
        if state == OBJECT:
            end = self._object.feed(buf)
            sink.args(buf if end is None else buf[:end])
            if end is None:
                return len(buf)
            sink.close()
            self.state = CLOSE
            return end
        if state == STRING:
            text, used, done = self._string.feed(buf, final)
            sink.args(text)
            if done:
                sink.close()
                self.state = CLOSE
            return used if used or done else None
        return self._close(buf, final)

    def _pending(self, buf: str, final: bool) -> int | None:
        got = self.head(buf, final)
        if isinstance(got, Need):
            return None
        if isinstance(got, Reject):  # content up to where it failed (at least the marker)
            used = max(got.at, self.marker_len)
            self.sink.content(buf[:used])
            self.state = self.rest
            return used
        if isinstance(got, Whole):
            self.sink.open(got.name, got.arguments)
            self.sink.close()
            self.state = CLOSE
            return got.end
        assert isinstance(got, Commit)
        self.sink.open(got.name)
        self.state = OBJECT if got.kind == "{" else STRING
        self._object = ObjectScanner()
        return got.at

    def _close(self, buf: str, final: bool) -> int | None:
        if not (self.tokens or self.more or self.end):
            self.state = self.rest
            return 0
        i = skip_ws(buf, 0)
        if self.tokens:
            choices = [(self.tokens[0], "token")]
        else:
            choices = [(t, "more") for t in self.more] + [(t, "end") for t in self.end]
        for token, kind in choices:
            if buf.startswith(token, i):
                if kind == "token":
                    self.tokens.pop(0)
                elif kind == "end":
                    self.state = self.rest
                elif token == DS_CALL_BEGIN:  # the next call's marker starts its held text
                    self.state, self.head, self.marker_len = PENDING, self._ds_call, len(token)
                    return i
                else:
                    self.state, self.head, self.marker_len = PENDING, self._next_body, 0
                return i + len(token)
        if not final and any(is_partial(buf[i:], token) for token, _ in choices):
            return None
        if final and i == len(buf):
            return i  # trailing whitespace after a call
        self.state = self.rest
        return 0

    # ----------------------------------------------------------------- heads

    def _body(self, buf: str, i: int, final: bool) -> Head:
        got = body_head(buf, i, self.sink.names, final)
        if isinstance(got, Commit):
            self.tokens = ["}", *self.after]
        elif isinstance(got, Whole):
            self.tokens = list(self.after)
        return got

    def _marked_body(self, buf: str, final: bool) -> Head:
        return self._body(buf, self.marker_len, final)

    def _prefilled_body(self, buf: str, final: bool) -> Head:
        """A natively forced call: the prompt ended with the begin marker (``required``) or
        also the body up to its arguments (named), which count as already read."""
        named = self.settings.mode == "named"
        given = call_prefix(self.settings.name or "") if named else ""
        got = self._body(given + buf, 0, final)
        if isinstance(got, Commit):
            return Commit(got.name, got.at - len(given), got.kind)
        if isinstance(got, Whole):
            return Whole(got.name, got.arguments, got.end - len(given))
        if isinstance(got, Reject):
            return Reject(max(got.at - len(given), 0))
        return got

    def _next_body(self, buf: str, final: bool) -> Head:
        return self._body(buf, 0, final)

    def _list(self, buf: str, final: bool) -> Head:
        """``[`` (after the marker and whitespace), then a body."""
        i = skip_ws(buf, self.marker_len)
        if i == len(buf):
            return Reject(i) if final else NEED
        return self._body(buf, i + 1, final) if buf[i] == "[" else Reject(i)

    def _llama(self, buf: str, final: bool) -> Head:
        i = skip_ws(buf, 0)
        if i == len(buf) or (is_partial(buf[i:], f.PYTHON_TAG) and not final):
            return Reject(len(buf)) if final else NEED
        if buf.startswith(f.PYTHON_TAG, i):
            i += len(f.PYTHON_TAG)
        return self._body(buf, i, final)

    def _mistral(self, buf: str, final: bool) -> Head:
        i = skip_ws(buf, self.marker_len)
        if i == len(buf):
            return Reject(i) if final else NEED
        if buf[i] == "[":
            self.after, self.more, self.end = (), (",",), ("]",)
            return self._body(buf, i + 1, final)
        self.after, self.more, self.end = (), (), ()
        at = i
        while at < len(buf) and buf[at] in _NAME_CHARS:
            at += 1
        if at == len(buf):
            return Reject(at) if final else NEED
        if at == i:
            return Reject(i)
        got = _expect(buf, at, f.MISTRAL_ARGS, final)
        if not isinstance(got, int):
            return got
        if buf[i:at] not in self.sink.names:
            return Reject(got)
        return self._raw_object(buf, got, buf[i:at], final, [])

    def _raw_object(self, buf: str, i: int, name: str, final: bool,
                    tokens: list[str]) -> Head:
        i = skip_ws(buf, i)
        if i == len(buf):
            return Reject(i) if final else NEED
        if buf[i] != "{":
            return Reject(i)
        self.tokens = tokens
        return Commit(name, i, "{")

    def _deepseek(self, buf: str, final: bool) -> Head:
        i = skip_ws(buf, self.marker_len)
        return self._ds_call(buf, final, i)

    def _ds_call(self, buf: str, final: bool, i: int = 0) -> Head:
        for token in (DS_CALL_BEGIN, f.DEEPSEEK_CALL_TYPE, f.DEEPSEEK_SEP):
            got = _expect(buf, i, token, final)
            if not isinstance(got, int):
                return got
            i = got
        line = i
        while line < len(buf) and buf[line] not in "\n<":
            line += 1
        if line == len(buf):
            return Reject(line) if final else NEED
        name = buf[i:line].strip()
        if name not in self.sink.names:
            return Reject(line)
        if buf[line] != "\n":
            return Reject(line)
        got = _expect(buf, skip_ws(buf, line), f.DEEPSEEK_ARGS_BEGIN, final)
        if not isinstance(got, int):
            return got
        return self._raw_object(buf, got, name, final, [f.DEEPSEEK_ARGS_END, DS_CALL_END])


def scanner(parser: str, sink: Sink, settings: ToolSettings) -> Scanner:
    """The scanner of a JSON-body format."""
    if parser in ("demo", "hermes"):
        fmt = f.TOOL_CALL_PARSERS[parser]
        calls = JsonCalls(sink, settings, fmt.begin, "_marked_body", after=(fmt.end,))
        if settings.mode in ("required", "named"):  # the prompt opened the call
            calls.state, calls.head = PENDING, calls._prefilled_body
        return calls
    if parser == "granite":
        return JsonCalls(sink, settings, f.GRANITE_CALL, "_list", more=(",",), end=("]",))
    if parser == "mistral":
        return JsonCalls(sink, settings, f.MISTRAL_CALLS, "_mistral")
    if parser == "deepseek_v3":
        return JsonCalls(sink, settings, f.DEEPSEEK_CALLS_BEGIN, "_deepseek",
                         more=(DS_CALL_BEGIN,), end=(f.DEEPSEEK_CALLS_END,))
    if parser == "llama3_json":
        return JsonCalls(sink, settings, None, "_llama", more=(f.LLAMA_CALL_SEP,))
    raise ValueError(f"no JSON tool-call format named {parser!r}")


class ForcedNamed(Scanner):
    """A forced named call: the whole output is its arguments."""

    def __init__(self, sink: Sink, settings: ToolSettings) -> None:
        super().__init__(sink, settings)
        self._opened = False

    def step(self, buf: str, final: bool) -> int | None:
        if not self._opened:
            self._opened = True
            self.sink.open(self.settings.name or "")
        self.sink.args(buf)
        return len(buf)


def forced_json(sink: Sink, settings: ToolSettings) -> Scanner:
    """The forced-JSON parser (format-independent forcing)."""
    if settings.mode == "named":
        return ForcedNamed(sink, settings)
    return JsonCalls(sink, settings, None, "_list", more=(",",), end=("]",))
