"""The ``input`` of a Responses request (a string or a list of items) and its
``instructions`` as chat messages. Mirrors ``rust/server/src/routes/responses/input.rs``.
Behaviour: docs/api.md, "Responses API".
"""

from __future__ import annotations

from typing import Any

from server.edge.error import bad_request
from server.routes.responses.fields import mapping as _object
from server.routes.responses.fields import sequence as _list
from server.routes.responses.fields import string as _string

TEXT_PARTS = ("input_text", "output_text")
ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}


def _parts(content: Any, path: str) -> str | list[dict[str, str]]:
    """A message item's content: a string, or text parts as chat text parts."""
    if isinstance(content, str):
        return content
    return _text_parts(content, path)


def _text_parts(content: Any, path: str) -> list[dict[str, str]]:
    """Content that is not a string: its text parts as chat text parts."""
    parts = []
    for j, part in enumerate(_list(content, path)):
        part = _object(part, f"{path}[{j}]")
        kind = _string(part.get("type"), f"{path}[{j}].type")
        if kind not in TEXT_PARTS:
            raise bad_request(f"content part type '{kind}' is not supported",
                              f"{path}[{j}].type")
        parts.append({"type": "text", "text": _string(part.get("text"), f"{path}[{j}].text")})
    return parts


def _output(value: Any, path: str) -> str:
    """A function_call_output's output: a string, or input_text parts joined."""
    if isinstance(value, str):
        return value
    return "".join(part["text"] for part in _text_parts(value, path))


def _reasoning_text(item: dict[str, Any], path: str) -> str:
    texts = []
    content = item.get("content")
    parts = [] if content is None else _list(content, f"{path}.content")
    for j, part in enumerate(parts):
        part = _object(part, f"{path}.content[{j}]")
        kind = _string(part.get("type"), f"{path}.content[{j}].type")
        if kind != "reasoning_text":
            raise bad_request(f"content part type '{kind}' is not supported",
                              f"{path}.content[{j}].type")
        texts.append(_string(part.get("text"), f"{path}.content[{j}].text"))
    if item.get("summary") is not None:
        _list(item["summary"], f"{path}.summary")
    return "".join(texts)


def messages(raw_input: Any, instructions: str | None,
             known_calls: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """``instructions`` and ``input`` as chat messages (``known_calls``: the call ids a
    ``previous_response_id`` declared)."""
    out: list[dict[str, Any]] = []
    if instructions is not None:
        out.append({"role": "system", "content": instructions})
    if isinstance(raw_input, str):
        out.append({"role": "user", "content": raw_input})
        return out
    if raw_input is None:
        raise bad_request("'input' is required", "input")
    items = _list(raw_input, "input")
    declared: set[str] = set(known_calls)
    reasoning: str | None = None  # waiting for the next assistant message
    open_calls = False  # the last chat message is an assistant one function_calls may join
    for i, item in enumerate(items):
        path = f"input[{i}]"
        item = _object(item, path)
        kind = _string(item.get("type", "message"), f"{path}.type")
        joins = False
        if kind == "message":
            role = _string(item.get("role"), f"{path}.role")
            if role not in ROLES:
                raise bad_request(f"invalid value for '{path}.role': expected one of user, "
                                  "system, developer, assistant", f"{path}.role")
            message: dict[str, Any] = {"role": ROLES[role],
                                       "content": _parts(item.get("content"), f"{path}.content")}
            if role == "assistant":
                if reasoning is not None:
                    message["reasoning_content"], reasoning = reasoning, None
                joins = True
            out.append(message)
        elif kind == "function_call":
            call_id = _string(item.get("call_id"), f"{path}.call_id")
            call = {"id": call_id, "type": "function", "function": {
                "name": _string(item.get("name"), f"{path}.name"),
                "arguments": _string(item.get("arguments"), f"{path}.arguments")}}
            declared.add(call_id)
            if open_calls:
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                message = {"role": "assistant", "tool_calls": [call]}
                if reasoning is not None:
                    message["reasoning_content"], reasoning = reasoning, None
                out.append(message)
            joins = True
        elif kind == "function_call_output":
            call_id = _string(item.get("call_id"), f"{path}.call_id")
            if call_id not in declared:
                raise bad_request(f"function_call_output for unknown call_id '{call_id}'",
                                  f"{path}.call_id")
            out.append({"role": "tool", "tool_call_id": call_id,
                        "content": _output(item.get("output"), f"{path}.output")})
        elif kind == "reasoning":
            reasoning = (reasoning or "") + _reasoning_text(item, path)
        else:
            raise bad_request(f"input item type '{kind}' is not supported", f"{path}.type")
        open_calls = joins
    if reasoning is not None:
        out.append({"role": "assistant", "content": "", "reasoning_content": reasoning})
    return out
