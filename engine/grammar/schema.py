"""The JSON Schema check run before a schema is compiled.

xgrammar compiles some keywords it does not enforce (``allOf``, ``not``, ``if``,
``uniqueItems``, ``contains``, ...): a schema using one would be accepted and then
silently not honoured. So a schema must first be valid JSON Schema (draft 2020-12, checked
by ``jsonschema``), and then use only the keywords below, each checked to be enforced
by the compiled grammar (tests/engine/test_grammar.py holds an instance that breaks each
one and must be rejected). Anything else is refused with the keyword and where it is.
"""

from __future__ import annotations

from typing import Any

from engine.grammar.errors import GrammarError

# Keywords the grammar enforces.
ENFORCED = frozenset(
    {
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "unevaluatedItems",
        "anyOf",
        "oneOf",
        "$ref",
        "$defs",
        "definitions",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
    }
)
# Keywords that never change which instances are valid.
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$schema",
        "$id",
        "$comment",
        "$anchor",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
    }
)
# The string formats xgrammar turns into a grammar.
FORMATS = frozenset(
    {
        "email",
        "date",
        "time",
        "date-time",
        "duration",
        "ipv4",
        "ipv6",
        "hostname",
        "uuid",
        "uri",
        "uri-reference",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
    }
)
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_VALUES = (
    "items",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
)
_SCHEMA_LISTS = ("prefixItems", "anyOf", "oneOf")


def check_schema(schema: Any) -> None:
    """Raise GrammarError unless ``schema`` is valid JSON Schema using enforced keywords."""
    import jsonschema  # here: an engine that never sees a schema never loads it

    if not isinstance(schema, dict | bool):
        raise GrammarError("the JSON schema must be an object")
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "".join(f"/{part}" for part in exc.path)
        raise GrammarError(
            f"the JSON schema is not valid JSON Schema at `#{where}`: {exc.message}"
        ) from None
    _walk(schema, "#")


def _walk(schema: Any, where: str) -> None:
    if isinstance(schema, bool):
        return
    for key, value in schema.items():
        if key in ANNOTATIONS:
            continue
        if key == "uniqueItems" and value is False:
            continue
        if key not in ENFORCED:
            raise GrammarError(
                f"the JSON schema keyword `{key}` (at `{where}`) is not "
                "supported: structured outputs cannot enforce it"
            )
        if key == "format" and value not in FORMATS:
            raise GrammarError(
                f"the JSON schema format `{value}` (at `{where}`) is not "
                f"supported; the supported formats are {', '.join(sorted(FORMATS))}"
            )
        if key in _SCHEMA_MAPS:
            for name, sub in value.items():
                _walk(sub, f"{where}/{key}/{name}")
        elif key in _SCHEMA_VALUES:
            _walk(value, f"{where}/{key}")
        elif key in _SCHEMA_LISTS:
            for i, sub in enumerate(value):
                _walk(sub, f"{where}/{key}/{i}")
