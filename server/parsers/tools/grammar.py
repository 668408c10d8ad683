"""Structural tags (xgrammar, compact JSON text) that make the engine generate a forced call
under ``tool_choice`` ``required`` or a named function: the format's own calls after the
prefill for the native formats (:func:`forced_tag`), vLLM's format-independent JSON forcing
for the others (:func:`json_forced_tag`). Rust: rust/server/src/parsers/tools/grammar.rs.
Behaviour: docs/api.md, "Tool calls".
"""

from __future__ import annotations

import json
from typing import Any

from server.parsers.tools.formats import ToolFormat, call_prefix
from server.parsers.tools.settings import ToolSettings


def compact(value: Any) -> str:
    """``value`` as compact JSON text (keys in order, non-ASCII kept), as
    ``server.validate.structured.compact`` writes a schema."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


_NO_PARAMETERS = {"type": "object", "properties": {}}


def _arguments(tool: dict[str, Any]) -> dict[str, Any]:
    parameters = tool["function"].get("parameters")
    schema = parameters if isinstance(parameters, dict) else _NO_PARAMETERS
    return {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1}


def _const(value: str) -> dict[str, Any]:
    return {"type": "const_string", "value": value}


def _named(settings: ToolSettings) -> dict[str, Any]:
    tools = settings.tools or []
    return next(t for t in tools if t["function"]["name"] == settings.name)


def forced_tag(fmt: ToolFormat, settings: ToolSettings) -> str | None:
    """The tag that constrains what follows the native prefill of a forced call (None
    when nothing is forced)."""
    tools = settings.tools or []
    close = _const("}" + fmt.end)
    if settings.mode == "named":
        form: dict[str, Any] = {"type": "sequence",
                                "elements": [_arguments(_named(settings)), close]}
    elif settings.mode == "required":
        calls = [{"type": "sequence", "elements": [
            _const(call_prefix(t["function"]["name"])), _arguments(t), close]} for t in tools]
        form = calls[0] if len(calls) == 1 else {"type": "or", "elements": calls}
        if settings.parallel:
            more = {"type": "sequence", "elements": [_const(fmt.begin), form]}
            form = {"type": "sequence", "elements": [form, {"type": "star", "content": more}]}
    else:
        return None
    return compact({"type": "structural_tag", "format": form})


def json_forced_tag(settings: ToolSettings) -> str | None:
    """The format-independent tag of a forced call (None when nothing is forced)."""
    tools = settings.tools or []
    if settings.mode == "named":
        form = _arguments(_named(settings))
    elif settings.mode == "required":
        calls = [{"type": "sequence", "elements": [
            _const(call_prefix(t["function"]["name"], "parameters")), _arguments(t),
            _const("}")]} for t in tools]
        call = calls[0] if len(calls) == 1 else {"type": "or", "elements": calls}
        elements: list[dict[str, Any]] = [_const("["), call]
        if settings.parallel:
            more = {"type": "sequence", "elements": [_const(", "), call]}
            elements.append({"type": "star", "content": more})
        form = {"type": "sequence", "elements": [*elements, _const("]")]}
    else:
        return None
    return compact({"type": "structural_tag", "format": form})
