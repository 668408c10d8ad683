"""Typed access to a Responses request's JSON fields: each miss a 400 naming the field's
path, in the Responses API's words (``invalid value for 'PATH': expected ...``). Mirrors
``rust/server/src/routes/responses/fields.rs``. Behaviour: docs/api.md, "Responses API".
"""

from __future__ import annotations

from typing import Any

from server.edge.error import bad_request


def invalid(path: str, expected: str) -> Exception:
    return bad_request(f"invalid value for '{path}': expected {expected}", path)


def string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise invalid(path, "a string")
    return value


def mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise invalid(path, "an object")
    return value


def sequence(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise invalid(path, "an array")
    return value


def boolean(value: Any, path: str) -> bool:
    if type(value) is not bool:
        raise invalid(path, "a boolean")
    return value
