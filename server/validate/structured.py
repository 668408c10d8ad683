"""Structured outputs: a request's ``response_format`` and ``structured_outputs`` checked,
rule for rule in the order of ``rust/server/src/validate/structured.rs``, and lowered into
the engine's :class:`~engine.protocol.StructuredOutputs` (JSON Schemas as compact JSON text,
:func:`compact`). Behaviour: docs/api.md, "Structured outputs".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import msgspec

from engine import protocol as p
from server.edge.error import bad_request

if TYPE_CHECKING:
    from server.validate.guided import Guided

RESPONSE_FORMAT = "response_format"
SO = "structured_outputs"
# The constraint fields, in the order the one-constraint rule names them.
CONSTRAINTS = (
    RESPONSE_FORMAT,
    f"{SO}.json",
    f"{SO}.regex",
    f"{SO}.choice",
    f"{SO}.grammar",
    f"{SO}.json_object",
    f"{SO}.structural_tag",
)
_KINDS = ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
_OPTIONS = (
    "disable_fallback",
    "disable_any_whitespace",
    "disable_additional_properties",
    "whitespace_pattern",
)
_KEYS = frozenset(_KINDS + _OPTIONS)
_ACCEPTED_TYPES = "the accepted types are `text`, `json_object` and `json_schema`"
class Constraint(msgspec.Struct, frozen=True):
    """A request's structured-output constraint: the field that set it (the ``param`` of
    the engine's compile errors) and what the engine enforces."""

    name: str
    spec: p.StructuredOutputs


def compact(value: Any) -> str:
    """``value`` as compact JSON text (keys in order, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def constraint(response_format: Any, structured_outputs: Any,
               guided: Guided | None = None) -> Constraint | None:
    """The request's one constraint (None: free text), or a 400; ``guided``: what its
    removed ``guided_*`` fields stand for (:mod:`server.validate.guided`)."""
    found: list[Constraint] = []
    spec = response_format_spec(response_format)
    if spec is not None:
        found.append(Constraint(RESPONSE_FORMAT, spec))
    found += structured_outputs_specs(structured_outputs)
    if guided is not None:
        found += structured_outputs_specs(guided.value, guided.names)
    if len(found) > 1:
        names = [f"`{c.name}`" for c in found]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        raise bad_request(
            f"only one structured-output constraint may be given; this request sets {listed}",
            found[1].name,
        )
    return found[0] if found else None


def response_format_spec(value: Any) -> p.StructuredOutputs | None:
    """``response_format`` checked (None: plain text)."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(kind, str):
        raise bad_request(
            f"`{RESPONSE_FORMAT}` must be an object with a string `type`; {_ACCEPTED_TYPES}",
            RESPONSE_FORMAT,
        )
    if kind == "text":
        return None
    if kind == "json_object":
        return p.StructuredOutputs(json_object=True)
    if kind != "json_schema":
        raise bad_request(
            f"`{RESPONSE_FORMAT}` of type `{kind}` is not supported; {_ACCEPTED_TYPES}",
            RESPONSE_FORMAT,
        )
    field = f"{RESPONSE_FORMAT}.json_schema"
    inner = value.get("json_schema")
    if not isinstance(inner, dict):
        raise bad_request(f"`{field}` must be an object with `name` and `schema`", field)
    if not isinstance(inner.get("schema"), dict):
        raise bad_request(f"`{field}.schema` must be a JSON Schema object", f"{field}.schema")
    if not isinstance(inner.get("name"), str):
        raise bad_request(f"`{field}.name` must be a string", f"{field}.name")
    return p.StructuredOutputs(json=compact(inner["schema"]))


def _json_object(text: str) -> Any:
    """``text`` parsed as JSON when it holds an object, else None."""
    try:
        value = msgspec.json.decode(text)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return value if isinstance(value, dict) else None


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def structured_outputs_specs(value: Any,
                             names: dict[str, str] | None = None) -> list[Constraint]:
    """``structured_outputs`` checked: the constraints it sets (one per key set; the
    caller refuses more than one). ``names``: the field each key came from, when not
    ``structured_outputs.<key>`` (the guided fields), named by its errors."""
    if value is None:
        return []
    if not isinstance(value, dict):
        raise bad_request(f"`{SO}` must be an object", SO)
    for key in sorted(value):
        if key not in _KEYS:
            raise bad_request(f"unknown field `{key}` in `{SO}`", f"{SO}.{key}")
    found: list[Constraint] = []

    def name(key: str) -> str:
        return names[key] if names is not None else f"{SO}.{key}"

    def fail(key: str, message: str) -> NoReturn:
        raise bad_request(message.replace(f"`{SO}.{key}", f"`{name(key)}"), name(key))

    def add(key: str, spec: p.StructuredOutputs) -> None:
        found.append(Constraint(name(key), spec))

    schema = value.get("json")
    if schema is not None:
        if isinstance(schema, str):
            schema = _json_object(schema)
        if not isinstance(schema, dict):
            fail("json", f"`{SO}.json` must be a JSON Schema (an object, or a string holding one)")
        add("json", p.StructuredOutputs(json=compact(schema)))
    regex = value.get("regex")
    if regex is not None:
        if not isinstance(regex, str):
            fail("regex", f"`{SO}.regex` must be a string")
        add("regex", p.StructuredOutputs(regex=regex))
    choice = value.get("choice")
    if choice is not None:
        if not (
            isinstance(choice, list) and choice and all(isinstance(item, str) for item in choice)
        ):
            fail("choice", f"`{SO}.choice` must be a non-empty list of strings")
        add("choice", p.StructuredOutputs(choice=list(choice)))
    grammar = value.get("grammar")
    if grammar is not None:
        if not (isinstance(grammar, str) and grammar):
            fail("grammar", f"`{SO}.grammar` must be a non-empty string (EBNF)")
        add("grammar", p.StructuredOutputs(grammar=grammar))
    json_object = value.get("json_object")
    if json_object is not None:
        if not _is_bool(json_object):
            fail("json_object", f"`{SO}.json_object` must be a boolean")
        if json_object:
            add("json_object", p.StructuredOutputs(json_object=True))
    tag = value.get("structural_tag")
    if tag is not None:
        if not (isinstance(tag, str) and _json_object(tag) is not None):
            fail("structural_tag", f"`{SO}.structural_tag` must be a string holding a JSON object")
        add("structural_tag", p.StructuredOutputs(structural_tag=tag))
    _check_options(value, fail)
    if not found:
        raise bad_request(
            f"`{SO}` must set one of `json`, `regex`, `choice`, `grammar`, "
            "`json_object` or `structural_tag`",
            SO,
        )
    return found


_ONLY_TRUE = {
    "disable_any_whitespace": "JSON is always generated without free whitespace",
    "disable_additional_properties": "properties a schema does not name are never generated",
}


def _check_options(value: dict[str, Any], fail: Callable[[str, str], NoReturn]) -> None:
    """The options vLLM takes next to the constraint: accepted where they change nothing."""
    for key in ("disable_fallback", *_ONLY_TRUE):
        option = value.get(key)
        if option is None:
            continue
        if not _is_bool(option):
            fail(key, f"`{SO}.{key}` must be a boolean")
        if key in _ONLY_TRUE and option is False:
            fail(key, f"`{SO}.{key}: false` is not supported: {_ONLY_TRUE[key]}")
    if value.get("whitespace_pattern") is not None:
        fail("whitespace_pattern", f"`{SO}.whitespace_pattern` is not supported")
