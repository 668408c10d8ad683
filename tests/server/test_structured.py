"""Structured outputs on the request surface (spec: docs/api.md "Structured outputs"):
``response_format`` and ``structured_outputs`` lowered into the engine's
``StructuredOutputs``, every refusal's status, ``param`` and exact words (the same words as
the Rust unit tests of ``validate/structured.rs``) and the one-constraint rule, through the
same ``params`` path that serving and ``vrs render`` use (tools: test_tool_forcing.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engine import protocol as p
from server.edge.error import APIError
from server.validate import guided, params, structured

pytestmark = pytest.mark.unit

USER = [{"role": "user", "content": "hi"}]
SO = "structured_outputs"
TYPES = "the accepted types are `text`, `json_object` and `json_schema`"
SCHEMA = {
    "type": "object",
    "properties": {"名前": {"type": "string"}, "a": {"type": "integer"}},
    "required": ["名前"],
}


def lowered(chat: bool = True, **fields: Any) -> params.Settings:
    """The checked settings of a request with ``fields``."""
    body = {"messages": USER} if chat else {"prompt": "x"}
    request = params.decode(json.dumps({**body, **fields}).encode(), chat)
    return params.validate(request, None, 1000)


def refused(chat: bool = True, **fields: Any) -> tuple[int, str | None, str]:
    with pytest.raises(APIError) as info:
        lowered(chat, **fields)
    return info.value.status, info.value.param, info.value.message


def spec(**fields: Any) -> p.StructuredOutputs | None:
    return lowered(**fields).sampling.structured_outputs


# --------------------------------------------------------------------------- lowering


def test_compact_json_keeps_key_order_and_non_ascii() -> None:
    assert structured.compact(SCHEMA) == (
        '{"type":"object","properties":{"名前":{"type":"string"},"a":{"type":"integer"}},'
        '"required":["名前"]}'
    )
    assert structured.compact({"b": [1, 2.5, None, True], "a": "x\ny"}) == (
        '{"b":[1,2.5,null,true],"a":"x\\ny"}'
    )


@pytest.mark.parametrize("chat", [True, False])
def test_response_format_json_schema_and_json_object(chat: bool) -> None:
    schema = {
        "type": "json_schema",
        "json_schema": {
            "name": "person",
            "schema": SCHEMA,
            "strict": True,
            "description": None,
            "extra": 1,
        },
    }
    settings = lowered(chat, response_format=schema)
    assert settings.sampling.structured_outputs == p.StructuredOutputs(
        json=structured.compact(SCHEMA)
    )
    assert settings.constraint == "response_format"
    for strict in (False, None):  # accepted, no effect
        inner = {"name": "p", "schema": SCHEMA, "strict": strict}
        assert (
            lowered(
                chat, response_format={"type": "json_schema", "json_schema": inner}
            ).sampling.structured_outputs
            == settings.sampling.structured_outputs
        )
    mode = lowered(chat, response_format={"type": "json_object", "other": 1})
    assert mode.sampling.structured_outputs == p.StructuredOutputs(json_object=True)
    assert mode.constraint == "response_format"


def test_plain_text_asks_for_nothing() -> None:
    for value in (None, {"type": "text"}, {"type": "text", "json_schema": 5}):
        settings = lowered(response_format=value)
        assert settings.sampling.structured_outputs is None and settings.constraint is None
    assert lowered(structured_outputs=None).constraint is None


@pytest.mark.parametrize(
    "key, value, want",
    [
        ("json", SCHEMA, p.StructuredOutputs(json=structured.compact(SCHEMA))),
        (
            "json",
            json.dumps(SCHEMA, indent=2),
            p.StructuredOutputs(json=structured.compact(SCHEMA)),
        ),
        ("regex", "[0-9]{3}", p.StructuredOutputs(regex="[0-9]{3}")),
        ("regex", "", p.StructuredOutputs(regex="")),
        ("choice", ["yes", "no", "日本"], p.StructuredOutputs(choice=["yes", "no", "日本"])),
        ("grammar", 'root ::= "a" | "b"', p.StructuredOutputs(grammar='root ::= "a" | "b"')),
        ("json_object", True, p.StructuredOutputs(json_object=True)),
        (
            "structural_tag",
            '{"type": "structural_tag", "format": {"type": "any_text"}}',
            p.StructuredOutputs(
                structural_tag='{"type": "structural_tag", "format": {"type": "any_text"}}'
            ),
        ),
    ],
)
def test_each_structured_outputs_kind(key: str, value: Any, want: p.StructuredOutputs) -> None:
    for chat in (True, False):
        settings = lowered(chat, structured_outputs={key: value})
        assert settings.sampling.structured_outputs == want
        assert settings.constraint == f"{SO}.{key}"


def test_options_that_change_nothing_are_accepted() -> None:
    options = {
        "disable_fallback": False,
        "disable_any_whitespace": True,
        "disable_additional_properties": True,
        "whitespace_pattern": None,
    }
    assert spec(structured_outputs={"regex": "a", **options}) == p.StructuredOutputs(regex="a")
    nulls = dict.fromkeys(options)
    assert spec(structured_outputs={"regex": "a", **nulls}) == p.StructuredOutputs(regex="a")
    # unset values of the other kinds do not count as constraints
    assert spec(structured_outputs={"choice": ["a"], "json": None, "json_object": False}) == (
        p.StructuredOutputs(choice=["a"])
    )


# --------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "value, param, message",
    [
        (
            "json",
            "response_format",
            f"`response_format` must be an object with a string `type`; {TYPES}",
        ),
        (
            {},
            "response_format",
            f"`response_format` must be an object with a string `type`; {TYPES}",
        ),
        (
            {"type": 1},
            "response_format",
            f"`response_format` must be an object with a string `type`; {TYPES}",
        ),
        (
            {"type": "xml"},
            "response_format",
            f"`response_format` of type `xml` is not supported; {TYPES}",
        ),
        (
            {"type": "json_schema"},
            "response_format.json_schema",
            "`response_format.json_schema` must be an object with `name` and `schema`",
        ),
        (
            {"type": "json_schema", "json_schema": [1]},
            "response_format.json_schema",
            "`response_format.json_schema` must be an object with `name` and `schema`",
        ),
        (
            {"type": "json_schema", "json_schema": {}},
            "response_format.json_schema.schema",
            "`response_format.json_schema.schema` must be a JSON Schema object",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "n", "schema": "{}"}},
            "response_format.json_schema.schema",
            "`response_format.json_schema.schema` must be a JSON Schema object",
        ),
        (
            {"type": "json_schema", "json_schema": {"schema": {}}},
            "response_format.json_schema.name",
            "`response_format.json_schema.name` must be a string",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": 3, "schema": {}}},
            "response_format.json_schema.name",
            "`response_format.json_schema.name` must be a string",
        ),
    ],
)
def test_response_format_refusals(value: Any, param: str, message: str) -> None:
    for chat in (True, False):
        assert refused(chat, response_format=value) == (400, param, message)


JSON_MESSAGE = (
    "`structured_outputs.json` must be a JSON Schema (an object, or a string holding one)"
)
TAG_MESSAGE = "`structured_outputs.structural_tag` must be a string holding a JSON object"


@pytest.mark.parametrize(
    "value, param, message",
    [
        ([], SO, "`structured_outputs` must be an object"),
        ("regex", SO, "`structured_outputs` must be an object"),
        (
            {},
            SO,
            "`structured_outputs` must set one of `json`, `regex`, `choice`, `grammar`, "
            "`json_object` or `structural_tag`",
        ),
        (
            {"json": None, "json_object": False, "disable_fallback": True},
            SO,
            "`structured_outputs` must set one of `json`, `regex`, `choice`, `grammar`, "
            "`json_object` or `structural_tag`",
        ),
        (
            {"zeta": 1, "beta": 2, "json": 5},
            f"{SO}.beta",
            "unknown field `beta` in `structured_outputs`",
        ),
        ({"json": "{not json"}, f"{SO}.json", JSON_MESSAGE),
        ({"json": "[1]"}, f"{SO}.json", JSON_MESSAGE),
        ({"json": ""}, f"{SO}.json", JSON_MESSAGE),
        ({"json": 3}, f"{SO}.json", JSON_MESSAGE),
        ({"json": [SCHEMA]}, f"{SO}.json", JSON_MESSAGE),
        ({"regex": 5}, f"{SO}.regex", "`structured_outputs.regex` must be a string"),
        (
            {"choice": []},
            f"{SO}.choice",
            "`structured_outputs.choice` must be a non-empty list of strings",
        ),
        (
            {"choice": ["a", 1]},
            f"{SO}.choice",
            "`structured_outputs.choice` must be a non-empty list of strings",
        ),
        (
            {"choice": "a"},
            f"{SO}.choice",
            "`structured_outputs.choice` must be a non-empty list of strings",
        ),
        (
            {"grammar": ""},
            f"{SO}.grammar",
            "`structured_outputs.grammar` must be a non-empty string (EBNF)",
        ),
        (
            {"grammar": ["root"]},
            f"{SO}.grammar",
            "`structured_outputs.grammar` must be a non-empty string (EBNF)",
        ),
        (
            {"json_object": 1},
            f"{SO}.json_object",
            "`structured_outputs.json_object` must be a boolean",
        ),
        ({"structural_tag": {"type": "structural_tag"}}, f"{SO}.structural_tag", TAG_MESSAGE),
        ({"structural_tag": "[]"}, f"{SO}.structural_tag", TAG_MESSAGE),
        ({"structural_tag": "{"}, f"{SO}.structural_tag", TAG_MESSAGE),
        (
            {"regex": "a", "disable_fallback": "yes"},
            f"{SO}.disable_fallback",
            "`structured_outputs.disable_fallback` must be a boolean",
        ),
        (
            {"regex": "a", "disable_any_whitespace": False},
            f"{SO}.disable_any_whitespace",
            "`structured_outputs.disable_any_whitespace: false` is not supported: JSON is always "
            "generated without free whitespace",
        ),
        (
            {"regex": "a", "disable_any_whitespace": 0},
            f"{SO}.disable_any_whitespace",
            "`structured_outputs.disable_any_whitespace` must be a boolean",
        ),
        (
            {"regex": "a", "disable_additional_properties": False},
            f"{SO}.disable_additional_properties",
            "`structured_outputs.disable_additional_properties: false` is not supported: "
            "properties a schema does not name are never generated",
        ),
        (
            {"regex": "a", "disable_additional_properties": "x"},
            f"{SO}.disable_additional_properties",
            "`structured_outputs.disable_additional_properties` must be a boolean",
        ),
        (
            {"regex": "a", "whitespace_pattern": " *"},
            f"{SO}.whitespace_pattern",
            "`structured_outputs.whitespace_pattern` is not supported",
        ),
        # the first error in key order wins: json before regex before the options
        ({"regex": 1, "json": 1}, f"{SO}.json", JSON_MESSAGE),
        (
            {"whitespace_pattern": "x", "choice": []},
            f"{SO}.choice",
            "`structured_outputs.choice` must be a non-empty list of strings",
        ),
        (
            {"whitespace_pattern": "x", "disable_fallback": 1, "regex": "a"},
            f"{SO}.disable_fallback",
            "`structured_outputs.disable_fallback` must be a boolean",
        ),
    ],
)
def test_structured_outputs_refusals(value: Any, param: str, message: str) -> None:
    for chat in (True, False):
        assert refused(chat, structured_outputs=value) == (400, param, message)


ONE = "only one structured-output constraint may be given; this request sets "


def test_one_constraint_per_request() -> None:
    json_mode = {"type": "json_object"}
    assert refused(response_format=json_mode, structured_outputs={"regex": "a"}) == (
        400,
        f"{SO}.regex",
        ONE + "`response_format` and `structured_outputs.regex`",
    )
    assert refused(
        False, structured_outputs={"structural_tag": "{}", "choice": ["a"], "json": {}}
    ) == (
        400,
        f"{SO}.choice",
        ONE + "`structured_outputs.json`, `structured_outputs.choice` and "
        "`structured_outputs.structural_tag`",
    )
    assert refused(structured_outputs={"grammar": "g", "json_object": True}) == (
        400,
        f"{SO}.json_object",
        ONE + "`structured_outputs.grammar` and `structured_outputs.json_object`",
    )
    # a text response_format is no constraint
    assert spec(response_format={"type": "text"}, structured_outputs={"regex": "a"}) == (
        p.StructuredOutputs(regex="a")
    )


def test_a_field_error_comes_before_the_one_constraint_rule() -> None:
    assert refused(response_format={"type": "json_object"}, structured_outputs={"regex": 1}) == (
        400,
        f"{SO}.regex",
        "`structured_outputs.regex` must be a string",
    )


def test_the_sampling_field_checks_come_first() -> None:
    status, param, _ = refused(logit_bias={"x": 1}, response_format={"type": "xml"})
    assert (status, param) == (400, "logit_bias")


# --------------------------------------------------------------------------- guided_*


@pytest.mark.parametrize("chat", [True, False])
def test_guided_fields_stand_for_their_structured_outputs_key(chat: bool) -> None:
    cases = [
        ({"guided_json": SCHEMA}, p.StructuredOutputs(json=structured.compact(SCHEMA))),
        ({"guided_json": json.dumps(SCHEMA)}, p.StructuredOutputs(json=structured.compact(SCHEMA))),
        ({"guided_regex": "a+"}, p.StructuredOutputs(regex="a+")),
        ({"guided_choice": ["a", "b"]}, p.StructuredOutputs(choice=["a", "b"])),
        ({"guided_grammar": 'root ::= "a"'}, p.StructuredOutputs(grammar='root ::= "a"')),
    ]
    for fields, want in cases:
        settings = lowered(chat, **fields, guided_decoding_backend="outlines")
        assert settings.sampling.structured_outputs == want
        assert settings.constraint == next(iter(fields))  # the engine's errors name it
    for key in guided.FIELDS:
        assert lowered(chat, **{key: None}).constraint is None
    # a text response_format asks for nothing
    assert lowered(chat, guided_regex="a", response_format={"type": "text"}).constraint == (
        "guided_regex")
    assert lowered(chat, guided_decoding_backend="xgrammar").constraint is None


@pytest.mark.parametrize("fields, param, message", [
    ({"guided_json": "x"}, "guided_json",
     "`guided_json` must be a JSON Schema (an object, or a string holding one)"),
    ({"guided_regex": 1}, "guided_regex", "`guided_regex` must be a string"),
    ({"guided_choice": []}, "guided_choice", "`guided_choice` must be a non-empty list of strings"),
    ({"guided_grammar": ""}, "guided_grammar",
     "`guided_grammar` must be a non-empty string (EBNF)"),
    ({"guided_regex": "a", "guided_whitespace_pattern": "\\s"}, "guided_whitespace_pattern",
     "`guided_whitespace_pattern` is not supported"),
    ({"guided_whitespace_pattern": "x"}, "guided_whitespace_pattern",
     "`guided_whitespace_pattern` is not supported"),
    ({"guided_json": SCHEMA, "guided_regex": "a"}, "guided_regex",
     "only one structured-output constraint may be given; this request sets `guided_json` and "
     "`guided_regex`"),
    ({"guided_regex": "a", "response_format": {"type": "json_object"}}, "guided_regex",
     "`guided_regex` cannot be combined with `response_format`: `guided_regex` is vLLM's "
     "removed name of `structured_outputs.regex`; send one constraint"),
    ({"guided_choice": ["a"], "response_format": {"type": "xml"}}, "guided_choice",
     "`guided_choice` cannot be combined with `response_format`: `guided_choice` is vLLM's "
     "removed name of `structured_outputs.choice`; send one constraint"),
    ({"guided_json": SCHEMA, "structured_outputs": {"regex": "a"}}, "guided_json",
     "`guided_json` cannot be combined with `structured_outputs`: `guided_json` is vLLM's "
     "removed name of `structured_outputs.json`; send one constraint"),
    ({"guided_decoding_backend": 1}, "guided_decoding_backend",
     "`guided_decoding_backend` must be a string"),
])
def test_guided_errors_name_the_guided_field(fields: dict[str, Any], param: str,
                                             message: str) -> None:
    for chat in (True, False):
        assert refused(chat, **fields) == (400, param, message)


def test_guided_fields_log_their_deprecation_once(caplog: pytest.LogCaptureFixture,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(guided, "_warned", False)
    with caplog.at_level("WARNING", logger="vrs.frontend"):
        lowered(guided_regex="a", guided_decoding_backend="xgrammar")
        lowered(guided_json=SCHEMA)
        lowered(response_format={"type": "json_object"})
    warnings = [r.getMessage() for r in caplog.records if "guided" in r.getMessage()]
    assert warnings == [
        "request fields guided_regex, guided_decoding_backend are vLLM's removed guided "
        "decoding: mapped onto structured_outputs (guided_decoding_backend ignored); send "
        "structured_outputs or response_format instead (logged once)"]


def test_every_constraint_at_once_is_named_in_order() -> None:
    everything = {
        "json": {},
        "regex": "a",
        "choice": ["a"],
        "grammar": "g",
        "json_object": True,
        "structural_tag": "{}",
    }
    names = [f"`{name}`" for name in structured.CONSTRAINTS]
    assert refused(response_format={"type": "json_object"}, structured_outputs=everything) == (
        400,
        structured.CONSTRAINTS[1],
        ONE + ", ".join(names[:-1]) + " and " + names[-1],
    )
