"""Text parameters -> JSON by the function's schema, for ``qwen3_coder`` parameter values
and ``pythonic`` string literals (vLLM's rule). Mirrors
``rust/server/src/parsers/tools/typed.rs``.

The schema type ``t`` is ``parameters.properties[P].type`` (a string or a list of strings;
missing: no schema). "Trimmed" is exactly ``" \t\n\r"`` stripped from both ends (not
Python's ``str.strip()``, which strips more). Each listed type is tried in order:

* ``null`` listed and the trimmed text is ``null`` -> ``null``;
* ``integer``: the trimmed text matches ``-?(0|[1-9][0-9]*)`` -> that text;
* ``number``: the trimmed text matches the JSON number grammar -> that text as written;
* ``boolean``: the trimmed text lower-cased is ``true`` / ``false``;
* ``object`` / ``array``: the trimmed text is strict JSON of that kind (no NaN/Infinity)
  -> the trimmed text as written;
* otherwise (string, no schema, nothing matched) -> a JSON string of the text untrimmed,
  serialised
  like ``json.dumps(s, ensure_ascii=False)`` (= serde_json).
"""

from __future__ import annotations

import json
import re
from typing import Any

INTEGER = re.compile(r"-?(?:0|[1-9][0-9]*)")
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_SPACES = " \t\n\r"


def json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _strict(text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return None


def schema_types(properties: dict[str, Any], name: str) -> list[str]:
    """The types listed for parameter ``name`` (empty: no schema)."""
    schema = properties.get(name)
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    return []


def typed(text: str, types: list[str]) -> str:
    """``text`` as the JSON value of the first type it fits (see the module docstring)."""
    trimmed = text.strip(_SPACES)
    for kind in types:
        if kind == "null" and trimmed == "null":
            return "null"
        if kind == "integer" and INTEGER.fullmatch(trimmed):
            return trimmed
        if kind == "number" and NUMBER.fullmatch(trimmed):
            return trimmed
        if kind == "boolean" and trimmed.lower() in ("true", "false"):
            return trimmed.lower()
        if kind in ("object", "array") and trimmed[:1] in "{[" and trimmed:
            value = _strict(trimmed)
            if isinstance(value, dict if kind == "object" else list):
                return trimmed
    return json_string(text)
