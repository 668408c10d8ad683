"""Text parameters -> JSON by the function's schema (vLLM's rule), for ``qwen3_coder``
parameter values and ``pythonic`` string literals: :func:`typed` tries each type the schema
lists, on the text trimmed of exactly space, tab, newline and carriage return. Mirrors
``rust/server/src/parsers/tools/typed.rs``. Behaviour: docs/api.md, "Tool calls".
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
