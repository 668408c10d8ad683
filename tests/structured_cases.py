"""Structured-output cases shared by the engine, mock and end-to-end tests.

Every schema bounds what it lets a model write (string lengths, integer ranges, item
counts), because the demo model has random weights: an unbounded string or number would
run until ``max_tokens`` and be cut short, which is the documented ``length`` outcome, not
what these tests check. Each output must validate (jsonschema), fullmatch or be a choice.
"""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema

from engine import protocol as p

SHORT = {"type": "string", "maxLength": 6}

SCHEMAS: dict[str, dict[str, Any]] = {
    "flat": {
        "type": "object",
        "properties": {"name": SHORT, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"],
    },
    "nested": {
        "type": "object",
        "properties": {
            "user": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 1, "maximum": 999},
                    "tag": SHORT,
                },
                "required": ["id", "tag"],
            },
            "ok": {"type": "boolean"},
        },
        "required": ["user", "ok"],
    },
    "array_bounds": {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "integer", "minimum": 0, "maximum": 9},
                "minItems": 2,
                "maxItems": 4,
            }
        },
        "required": ["items"],
    },
    "enum": {
        "type": "object",
        "properties": {
            "color": {"enum": ["red", "green", "blue"]},
            "size": {"enum": [1, 2, 3, None]},
        },
        "required": ["color", "size"],
    },
    "optional": {
        "type": "object",
        "properties": {
            "a": {"type": "integer", "minimum": 0, "maximum": 5},
            "b": SHORT,
            "c": {"type": "boolean"},
        },
        "required": ["a"],
    },
    "number_bounds": {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": -50, "maximum": 50},
            "level": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        },
        "required": ["score", "level"],
    },
    "pattern": {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
            "date": {"type": "string", "pattern": "^20[0-9]{2}-[01][0-9]$"},
        },
        "required": ["code", "date"],
    },
    "any_of": {
        "type": "object",
        "properties": {
            "value": {
                "anyOf": [
                    {"type": "integer", "minimum": 0, "maximum": 99},
                    {"type": "boolean"},
                    SHORT,
                ]
            }
        },
        "required": ["value"],
    },
    "refs": {
        "$defs": {
            "point": {
                "type": "object",
                "properties": {
                    "x": {"type": "integer", "minimum": 0, "maximum": 9},
                    "y": {"type": "integer", "minimum": 0, "maximum": 9},
                },
                "required": ["x", "y"],
            }
        },
        "type": "object",
        "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
        "required": ["start", "end"],
    },
    "array_of_objects": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {"k": {"enum": ["a", "b"]}, "v": {"type": "boolean"}},
            "required": ["k", "v"],
        },
        "minItems": 1,
        "maxItems": 3,
    },
    "const_and_null": {
        "type": "object",
        "properties": {"kind": {"const": "point"}, "note": {"type": ["null", "boolean"]}},
        "required": ["kind", "note"],
    },
}

REGEXES = [r"[a-z]{2,5}@[a-z]{2,4}\.com", r"\d{3}-\d{4}", r"(yes|no|maybe)!?", r"[A-F0-9]{8}"]
CHOICES = [["yes", "no"], ["red", "green", "blue", "日本"], ['a "quoted" one', "back\\slash"]]
# EBNF (xgrammar's dialect) with bounded repetition, and what each output must look like.
GRAMMARS = [
    ('root ::= "(" digit digit? digit? ")"\ndigit ::= [0-9]', r"\([0-9]{1,3}\)"),
    ('root ::= item ("," item)?\nitem ::= "x" | "y" | "z"', r"[xyz](,[xyz])?"),
]


def schema_text(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def cases() -> list[tuple[str, p.StructuredOutputs, str, Any]]:
    """(name, spec, check kind, rule) for every schema, regex, choice list and grammar."""
    out = [
        (f"json-{n}", p.StructuredOutputs(json=schema_text(s)), "json", s)
        for n, s in SCHEMAS.items()
    ]
    out += [(f"regex-{i}", p.StructuredOutputs(regex=r), "regex", r) for i, r in enumerate(REGEXES)]
    out += [
        (f"choice-{i}", p.StructuredOutputs(choice=c), "choice", c) for i, c in enumerate(CHOICES)
    ]
    out += [
        (f"grammar-{i}", p.StructuredOutputs(grammar=g), "regex", r)
        for i, (g, r) in enumerate(GRAMMARS)
    ]
    return out


def check(kind: str, rule: Any, text: str) -> None:
    """``text`` follows the constraint: ``json`` validates against the schema ``rule``,
    ``object`` is a JSON object, ``choice`` is in ``rule``, ``regex`` fullmatches it."""
    if kind == "json":
        jsonschema.validate(json.loads(text), rule)
    elif kind == "object":
        assert isinstance(json.loads(text), dict), text
    elif kind == "choice":
        assert text in rule, text
    else:
        assert re.fullmatch(rule, text), (rule, text)


def closing_bias(encode: Any) -> dict[int, float]:
    """JSON mode on random weights never closes its strings by chance: logit_bias toward
    `{}` keeps it short, and a stronger one toward arrays must lose to the grammar.
    ``encode``: text -> token ids (without special tokens)."""
    bias = {"{}": 30.0, "[": 50.0, "[]": 50.0}
    out = {}
    for text, value in bias.items():
        (token,) = encode(text)
        out[token] = value
    return out
