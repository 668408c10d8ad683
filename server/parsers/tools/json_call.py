"""Incremental scanning of JSON call bodies, shared by the JSON formats. Mirrors
``rust/server/src/parsers/tools/json_call.rs``.

A body is ``{`` ws ``"name"`` ws ``:`` ws STRING ws ``,`` ws KEY ws ``:`` ws VALUE ws ``}``
with KEY ``"arguments"`` or ``"parameters"``. :func:`body_head` reads it up to the commit
point, the first character of VALUE: ``{`` (the arguments are the raw object text, byte for
byte, streamed until the braces balance, :class:`ObjectScanner`; braces inside JSON strings
do not count) or ``"`` (a string holding the arguments' JSON: its decoded text is streamed,
:class:`StringDecoder`, an incomplete escape held back). Any other VALUE start, a name not
in ``tools`` or another key is not a call. When the first key is not ``"name"`` the body is
held until its braces balance and parsed whole (:func:`parse_call`): a JSON object with a
string ``name`` and an object (raw text) or string (decoded) ``arguments`` / ``parameters``.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

_WS = " \t\n\r"
KEYS = ("arguments", "parameters")


class Need(msgspec.Struct, frozen=True):
    """More text is needed to decide."""


class Reject(msgspec.Struct, frozen=True):
    """Not a call: the text up to ``at`` (where it failed; the end of the text when the
    output ended first) is content, and the marker search resumes there."""

    at: int


class Commit(msgspec.Struct, frozen=True):
    """A call of ``name`` whose arguments start at ``at`` (``{``: raw object, ``"``:
    string, ``at`` just after the quote)."""

    name: str
    at: int
    kind: str


class Whole(msgspec.Struct, frozen=True):
    """A body parsed whole, ending at ``end``."""

    name: str
    arguments: str
    end: int


NEED = Need()
Head = Need | Reject | Commit | Whole


def skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def string_end(text: str, i: int) -> int | None:
    """The index after the JSON string starting at ``text[i] == '"'`` (None: unfinished)."""
    i += 1
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            return i + 1
        i += 1
    return None


def balanced_end(text: str, i: int) -> int | None:
    """The index after the object or array starting at ``text[i]`` once its brackets
    balance (JSON-string aware; None: unfinished)."""
    end = ObjectScanner().feed(text[i:])
    return None if end is None else i + end


def _decode_string(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def body_head(text: str, i: int, names: frozenset[str], final: bool) -> Head:
    """A body starting at ``text[i]`` (after whitespace) read up to its commit point."""
    i = skip_ws(text, i)
    if i == len(text):
        return Reject(i) if final else NEED
    if text[i] != "{":
        return Reject(i)
    start = i
    parts: list[Any] = []  # the name key, the name, the arguments key
    i = skip_ws(text, i + 1)
    for expect in ('"', ":", '"', ",", '"', ":", "value"):
        i = skip_ws(text, i)
        if i == len(text):
            return Reject(i) if final else NEED
        if expect == "value":
            if text[i] == "{":
                return Commit(parts[1], i, "{")
            return Commit(parts[1], i + 1, '"') if text[i] == '"' else Reject(i)
        if text[i] != expect:
            return Reject(i)
        if expect != '"':
            i += 1
            continue
        end = string_end(text, i)
        if end is None:
            return Reject(len(text)) if final else NEED
        value = _decode_string(text[i:end])
        if not isinstance(value, str):
            return Reject(i)
        if len(parts) == 0 and value != "name":
            return _whole(text, start, names, final)
        if len(parts) == 1 and value not in names:
            return Reject(end)
        if len(parts) == 2 and value not in KEYS:
            return Reject(i)
        parts.append(value)
        i = end
    return Reject(i)  # not reached: the loop returns at "value"


def _whole(text: str, start: int, names: frozenset[str], final: bool) -> Head:
    end = balanced_end(text, start)
    if end is None:
        return Reject(len(text)) if final else NEED
    parsed = parse_call(text[start:end])
    if parsed is None or parsed[0] not in names:
        return Reject(end)
    return Whole(parsed[0], parsed[1], end)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _object_spans(body: str) -> dict[str, tuple[int, int]] | None:
    """The top-level keys of a JSON object and the spans of their raw values."""
    i = skip_ws(body, 0)
    if i >= len(body) or body[i] != "{":
        return None
    i = skip_ws(body, i + 1)
    spans: dict[str, tuple[int, int]] = {}
    if i < len(body) and body[i] == "}":
        i += 1
    else:
        while True:
            if i >= len(body) or body[i] != '"':
                return None
            key, i = _DECODER.raw_decode(body, i)
            i = skip_ws(body, i)
            if i >= len(body) or body[i] != ":":
                return None
            start = skip_ws(body, i + 1)
            _, end = _DECODER.raw_decode(body, start)
            if key in spans and key in ("name", *KEYS):
                return None  # a duplicate field, as serde refuses it
            spans[key] = (start, end)
            i = skip_ws(body, end)
            if i < len(body) and body[i] == ",":
                i = skip_ws(body, i + 1)
                continue
            if i < len(body) and body[i] == "}":
                i += 1
                break
            return None
    return spans if skip_ws(body, i) == len(body) else None


def parse_call(body: str) -> tuple[str, str] | None:
    """(name, arguments) of a whole call body, or None when it is not a valid call."""
    try:
        spans = _object_spans(body)
        if spans is None or "name" not in spans:
            return None
        keys = [key for key in KEYS if key in spans]
        if len(keys) != 1:
            return None
        name = json.loads(body[slice(*spans["name"])])
        raw = body[slice(*spans[keys[0]])]
        arguments = json.loads(raw) if raw.startswith('"') else raw
    except (ValueError, RecursionError):
        return None
    if not isinstance(name, str) or not isinstance(arguments, str):
        return None
    if not raw.startswith(("{", '"')):
        return None
    return name, arguments


class ObjectScanner:
    """Finds where a raw JSON object streamed in pieces ends (its braces balance)."""

    __slots__ = ("_depth", "_in_string", "_escaped")

    def __init__(self) -> None:
        self._depth, self._in_string, self._escaped = 0, False, False

    def feed(self, text: str) -> int | None:
        """The index in ``text`` just after the object's end (None: not yet)."""
        depth, in_string, escaped = self._depth, self._in_string, self._escaped
        end = None
        for j, ch in enumerate(text):
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    end = j + 1
                    break
        self._depth, self._in_string, self._escaped = depth, in_string, escaped
        return end


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
            "t": "\t"}
_HEX = set("0123456789abcdefABCDEF")


def _hex4(text: str, i: int) -> int | None:
    """The code unit of ``\\uXXXX`` at ``text[i]`` (-1: unfinished, None: not an escape)."""
    if len(text) < i + 6:
        return -1 if all(c in _HEX for c in text[i + 2:]) else None
    digits = text[i + 2:i + 6]
    return int(digits, 16) if all(c in _HEX for c in digits) else None


class StringDecoder:
    """Decodes a JSON string streamed in pieces (after its opening quote)."""

    __slots__ = ()

    def feed(self, text: str, final: bool) -> tuple[str, int, bool]:
        """(decoded text, characters used, whether the closing quote was reached). An
        incomplete escape at the end is not used (unless ``final``: then it is dropped)."""
        out: list[str] = []
        i = 0
        while i < len(text):
            ch = text[i]
            if ch == '"':
                return "".join(out), i + 1, True
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            if i + 1 == len(text):
                break
            esc = text[i + 1]
            if esc != "u":
                out.append(_ESCAPES.get(esc, "\\" + esc))
                i += 2
                continue
            unit = _hex4(text, i)
            if unit == -1:
                break
            if unit is None:
                out.append("\\u")
                i += 2
                continue
            if 0xD800 <= unit < 0xE000:  # a surrogate: a pair, else U+FFFD
                rest = text[i + 6:i + 12]
                if unit < 0xDC00 and len(rest) < 6 and (rest in ("", "\\") or (
                        rest.startswith("\\u") and all(c in _HEX for c in rest[2:]))):
                    break
                low = _hex4(text, i + 6) if rest.startswith("\\u") else None
                if unit < 0xDC00 and low is not None and 0xDC00 <= low < 0xE000:
                    out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)))
                    i += 12
                    continue
                unit = 0xFFFD
            out.append(chr(unit))
            i += 6
        return "".join(out), (len(text) if final else i), False
