"""The pieces of the tool-call formats unit by unit: typed parameters, the JSON string
decoder's hold-back of split escapes, pythonic literals and the JSON body's commit point.
The same rules as rust/server/src/parsers/tools/{typed,json_call,pythonic}.rs."""

from __future__ import annotations

import pytest

from server.parsers.tools.json_call import (
    NEED,
    Commit,
    Reject,
    StringDecoder,
    Whole,
    body_head,
)
from server.parsers.tools.pythonic import Incomplete, Malformed, literal
from server.parsers.tools.typed import typed

pytestmark = pytest.mark.unit

NAMES = frozenset({"f"})


@pytest.mark.parametrize("text, types, expected", [
    (" 7 ", ["integer"], "7"),
    ("07", ["integer"], '"07"'),
    ("-0.5e+3", ["number"], "-0.5e+3"),
    ("1.", ["number"], '"1."'),
    ("TRUE", ["boolean"], "true"),
    ("null", ["null", "integer"], "null"),
    ("null", ["integer"], '"null"'),
    (' {"a": [1]} ', ["object"], '{"a": [1]}'),
    ("[1, NaN]", ["array"], '"[1, NaN]"'),
    ("[1]", ["object", "array"], "[1]"),
    ('x"\\\n\t\x01é🌸', [], '"x\\"\\\\\\n\\t\\u0001é🌸"'),
    ("12", ["string", "integer"], "12"),  # string is not tried: only the fallback
])
def test_typed_parameters(text: str, types: list[str], expected: str) -> None:
    assert typed(text, types) == expected


def test_string_arguments_hold_back_a_split_escape() -> None:
    decoder = StringDecoder()
    assert decoder.feed('ab\\', False) == ("ab", 2, False)
    assert decoder.feed('\\u00', False) == ("", 0, False)
    assert decoder.feed('\\ud83c', False) == ("", 0, False)  # a pair's first half waits
    assert decoder.feed('\\ud83c\\udf38"', False) == ("🌸", 13, True)
    assert decoder.feed('\\ud83cx', False) == ("\ufffdx", 7, False)
    assert decoder.feed('\\n\\"\\/"rest', False) == ('\n"/', 7, True)


def test_json_body_commit_point() -> None:
    assert body_head('{"name": "f", "arguments": {', 0, NAMES, False) == Commit("f", 27, "{")
    assert body_head(' {"name":"f","parameters":"{', 0, NAMES, False) == Commit("f", 27, '"')
    assert body_head('{"name": "f", "argu', 0, NAMES, False) is NEED
    assert body_head('{"name": "f", "argu', 0, NAMES, True) == Reject(19)
    assert body_head('{"name": "g", ', 0, NAMES, False) == Reject(12)  # after the name
    assert body_head('{"name": "f", "arguments": 1', 0, NAMES, False) == Reject(27)
    assert body_head('{"name": "f", "id": 1', 0, NAMES, False) == Reject(14)
    assert body_head('{"arguments": {}, "name": "f"', 0, NAMES, False) is NEED
    assert body_head('{"arguments": {}, "name": "f"} x', 0, NAMES, False) == Whole("f", "{}", 30)
    assert body_head("[", 0, NAMES, False) == Reject(0)
    assert body_head('{"x": 1} <', 0, NAMES, False) == Reject(8)  # after the whole body
    assert body_head("{ 1", 0, NAMES, False) == Reject(2)


def test_pythonic_literals() -> None:
    assert literal("'a\\'b\\x41\\u00e9' ", 0) == ('"a\'bAé"', 16, "a'bAé")
    assert literal("[1, (True, None), {'k': -2.5e3}] ", 0)[:2] == (
        '[1, [true, null], {"k": -2.5e3}]', 32)
    assert literal("[]", 0)[:2] == ("[]", 2)
    for text in ("12", "'abc", "[1, 2", "Tru", "{'a': 1"):
        with pytest.raises(Incomplete):
            literal(text, 0)
    for text in ("foo)", "0x1f)", "'\\q'", "{1: 2}", "1_000)", "[1 2]"):
        with pytest.raises(Malformed):
            literal(text, 0)
