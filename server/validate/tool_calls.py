"""An assistant message's ``tool_calls`` as the chat template sees them (vLLM's
``_postprocess_messages``): each call's ``function.arguments`` an object, not the JSON text
a client sends, since templates iterate it (``.items()``) or write it with ``tojson``.
Absent, null or empty arguments become ``{}``, an object is kept, a string is parsed as
JSON; a string that is not JSON, or JSON that is not an object, becomes ``{}`` with a
warning (history the client cannot fix must not fail every later turn). An entry that is
not an object, or not a call of type ``function`` with a ``function`` object, is a 400.
Rust: rust/server/src/validate/prompt/tool_calls.rs.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from server.edge.error import APIError, bad_request

logger = logging.getLogger("vrs.frontend")

__all__ = ["template_tool_calls"]


def _no_constants(name: str) -> Any:
    # NaN / Infinity are not JSON (the Rust frontend's parser refuses them too)
    raise ValueError(f"{name} is not JSON")


def _arguments(value: Any, param: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value:
        return {}  # absent, null, "" (and values no client sends: vLLM's rule)
    try:
        parsed = json.loads(value, parse_constant=_no_constants)
    except ValueError:
        logger.warning("`%s.function.arguments` is not valid JSON (%d chars); the chat "
                       "template gets {}", param, len(value))
        return {}
    if not isinstance(parsed, dict):
        logger.warning("`%s.function.arguments` is JSON but not an object; the chat "
                       "template gets {}", param)
        return {}
    return parsed


def _bad_entry(param: str, what: str) -> APIError:
    return bad_request(f"`{param}` is {what}; an assistant tool call must be an object "
                       "with `type` \"function\" and a `function` object", param)


def template_tool_calls(calls: list[Any], param: str) -> list[dict[str, Any]]:
    """The calls of an assistant message (``param``: its ``tool_calls`` path) as the
    template sees them; new objects, the request's left as they are."""
    out = []
    for j, call in enumerate(calls):
        at = f"{param}[{j}]"
        if not isinstance(call, dict):
            raise _bad_entry(at, "not an object")
        function = call.get("function")
        if call.get("type", "function") != "function" or not isinstance(function, dict):
            raise _bad_entry(at, "not a function call")
        arguments = _arguments(function.get("arguments"), at)
        out.append({**call, "function": {**function, "arguments": arguments}})
    return out
