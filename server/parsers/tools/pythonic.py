"""The ``pythonic`` tool-call format (Llama 3.2 / Llama 4 model cards, vLLM's ``pythonic``):
a scanner of a Python list of calls, ``[`` NAME ``(`` KW ``=`` LITERAL, ... ``)``, ... ``]``,
committing at ``NAME(`` and giving each keyword argument once the ``,`` or ``)`` after it
arrives; string literals are typed by :mod:`server.parsers.tools.typed`. Mirrors
``rust/server/src/parsers/tools/pythonic.rs``. Behaviour: docs/api.md, "Tool calls".
"""

from __future__ import annotations

import re
from typing import Any

from server.parsers.tools.formats import PYTHON_END, PYTHON_START
from server.parsers.tools.scanner import Scanner, Sink, is_partial
from server.parsers.tools.settings import ToolSettings, property_types
from server.parsers.tools.typed import NUMBER, json_string, schema_types, typed

START, NAME, ARGS, AFTER, END, ALL = range(6)
_CALL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD = re.compile(r"[A-Za-z_0-9.+\-]*")
_WS = " \t\n\r"
_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
_CONSTANTS = {"True": "true", "False": "false", "None": "null"}


class Incomplete(Exception):
    """The text ends inside the literal."""


class Malformed(Exception):
    """Not a literal of the pythonic format."""


def _ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


_STOPS = {"'": re.compile(r"['\\]"), '"': re.compile(r'["\\]')}


def _string(text: str, i: int) -> tuple[str, int]:
    quote, out, i = text[i], [], i + 1
    stops = _STOPS[quote]
    while True:
        stop = stops.search(text, i)  # plain text up to the next quote or backslash
        if stop is None:
            raise Incomplete
        out.append(text[i:stop.start()])
        i = stop.start()
        if text[i] == quote:
            return "".join(out), i + 1
        if i + 1 >= len(text):
            raise Incomplete
        esc = text[i + 1]
        if esc in _ESCAPES:
            out.append(_ESCAPES[esc])
            i += 2
            continue
        size = {"x": 2, "u": 4}.get(esc)
        if size is None:
            raise Malformed
        digits = text[i + 2:i + 2 + size]
        if not all(c in "0123456789abcdefABCDEF" for c in digits):
            raise Malformed
        if len(digits) < size:
            raise Incomplete
        code = int(digits, 16)
        out.append("\ufffd" if 0xD800 <= code < 0xE000 else chr(code))
        i += 2 + size


def literal(text: str, i: int) -> tuple[str, int, str | None]:
    """(JSON text, end, decoded text when it is a string) of the literal at ``text[i]``."""
    if i >= len(text):
        raise Incomplete
    ch = text[i]
    if ch in "'\"":
        value, end = _string(text, i)
        return json_string(value), end, value
    if ch in "[({":
        close = {"[": "]", "(": ")", "{": "}"}[ch]
        items: list[str] = []
        i = _ws(text, i + 1)
        while True:
            if i >= len(text):
                raise Incomplete
            if text[i] == close:
                break
            if ch == "{":
                if text[i] not in "'\"":
                    raise Malformed
                key, i = _string(text, i)
                i = _ws(text, i)
                if i >= len(text):
                    raise Incomplete
                if text[i] != ":":
                    raise Malformed
                value, i, _ = literal(text, _ws(text, i + 1))
                items.append(json_string(key) + ": " + value)
            else:
                value, i, _ = literal(text, i)
                items.append(value)
            i = _ws(text, i)
            if i >= len(text):
                raise Incomplete
            if text[i] == ",":
                i = _ws(text, i + 1)
            elif text[i] != close:
                raise Malformed
        body = ", ".join(items)
        return ("{" + body + "}" if ch == "{" else "[" + body + "]"), i + 1, None
    word = _WORD.match(text, i)
    end = word.end() if word else i
    if end == len(text):
        raise Incomplete
    token = text[i:end]
    if token in _CONSTANTS:
        return _CONSTANTS[token], end, None
    if token and NUMBER.fullmatch(token):
        return token, end, None
    raise Malformed


class Pythonic(Scanner):
    def __init__(self, sink: Sink, settings: ToolSettings) -> None:
        super().__init__(sink, settings)
        self.state = START
        self._properties: dict[str, Any] = {}
        self._first = True

    def step(self, buf: str, final: bool) -> int | None:
        state = self.state
        if state == ALL:
            self.sink.content(buf)
            return len(buf)
        if state in (START, NAME):
            return self._name(buf, final)
        if state == ARGS:
            return self._argument(buf, final)
        i = _ws(buf, 0)
        if state == AFTER:  # after a call's ")": "," and the next call, or "]"
            if i < len(buf) and buf[i] in ",]":
                self.state = NAME if buf[i] == "," else END
                return i + 1
            if i == len(buf) and not final:
                return None
            self.state = ALL
            return i if final and i == len(buf) else 0
        if buf.startswith(PYTHON_END, i):  # END
            self.state = ALL
            return i + len(PYTHON_END)
        if not final and is_partial(buf[i:], PYTHON_END):
            return None
        self.state = ALL
        return 0

    def _name(self, buf: str, final: bool) -> int | None:
        i = _ws(buf, 0)
        if self.state == START:
            if not final and is_partial(buf[i:], PYTHON_START):
                return None
            if buf.startswith(PYTHON_START, i):
                i = _ws(buf, i + len(PYTHON_START))
            if i == len(buf) and not final:
                return None
            if i == len(buf) or buf[i] != "[":
                self.state = ALL
                return 0
            i = _ws(buf, i + 1)
        match = _CALL_NAME.match(buf, i)
        end = match.end() if match else i
        if end == len(buf) and not final:
            return None
        name = buf[i:end]
        if end < len(buf) and buf[end] == "(" and name in self.sink.names:
            self.sink.open(name, "{")
            self._properties = property_types(self.settings, name)
            self._first = True
            self.state = ARGS
            return end + 1
        self.state = ALL  # not a call: the held text is content
        return 0

    def _argument(self, buf: str, final: bool) -> int | None:
        i = _ws(buf, 0)
        if i < len(buf) and buf[i] == ")":
            self.sink.args("}")
            self.sink.close()
            self.state = AFTER
            return i + 1
        try:
            match = _KEYWORD.match(buf, i)
            if match is None:
                raise Incomplete if i == len(buf) else Malformed
            j = _ws(buf, match.end())
            if j >= len(buf):
                raise Incomplete
            if buf[j] != "=":
                raise Malformed
            value, j, decoded = literal(buf, _ws(buf, j + 1))
            j = _ws(buf, j)
            if j >= len(buf):
                raise Incomplete
            if buf[j] not in ",)":
                raise Malformed
        except Incomplete:
            return len(buf) if final else None  # at the end: the call stays as it is
        except (Malformed, RecursionError):  # the rest, from the whitespace before it,
            self.sink.args("}")  # is content
            self.sink.close()
            self.state = ALL
            return 0
        if decoded is not None:
            value = typed(decoded, schema_types(self._properties, match.group()))
        self.sink.args(("" if self._first else ", ") + json_string(match.group()) + ": " + value)
        self._first = False
        return j + 1 if buf[j] == "," else j
