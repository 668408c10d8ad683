"""``messages`` -> chat messages: text blocks -> text parts, a user's ``tool_result`` s ->
tool messages (before the rest of that user message), an assistant's ``tool_use`` s ->
``tool_calls``, its ``thinking`` -> ``reasoning_content``, ``system`` messages -> the system
prompt or system messages. Mirrors ``rust/server/src/routes/messages/blocks.rs``.
Behaviour: docs/api.md, "Request fields".
"""

from __future__ import annotations

from typing import Any

import msgspec

from server.edge.error import bad_request
from server.routes.messages.json import (
    block_type,
    cache_control,
    expected,
    field_required,
    keys,
    mapping,
    not_supported,
    one_of,
    string,
    system_text,
    text_of,
    texts,
)

TOOL_RESULT_KEYS = ("type", "tool_use_id", "content", "is_error", "cache_control")
TOOL_USE_KEYS = ("type", "id", "name", "input", "cache_control")
THINKING_KEYS = ("type", "thinking", "signature")
REDACTED_THINKING_KEYS = ("type", "data")
ROLES = ("user", "assistant", "system")
_compact = msgspec.json.Encoder().encode


def messages(raw: list[Any], system: str, merge_system: bool) -> list[dict[str, Any]]:
    """The chat messages of ``raw`` (a non-empty list) after the system prompt ``system``.
    A ``system`` message's text joins that prompt when ``merge_system`` (the chat template
    takes no system message after the first), else it stays a system message in place."""
    conversation = _Conversation(merge_system)
    conversation.system = system
    for i, message in enumerate(raw):
        conversation.add(message, i)
    lead = [{"role": "system", "content": conversation.system}] if conversation.system else []
    return lead + conversation.messages


def _need(item: dict[str, Any], key: str, path: str) -> Any:
    """The value of ``key``, required (null is absent)."""
    if item.get(key) is None:
        raise field_required(f"{path}.{key}")
    return item[key]


class _Conversation:
    """The chat messages so far, the leading system prompt, and the tool_use ids the
    assistant turns declared."""

    def __init__(self, merge_system: bool) -> None:
        self.merge_system = merge_system
        self.system = ""
        self.messages: list[dict[str, Any]] = []
        self.call_ids: set[str] = set()

    def add(self, message: Any, i: int) -> None:
        path = f"messages[{i}]"
        message = mapping(message, path)
        keys(message, ("role", "content"), path)
        for key in ("role", "content"):
            if message.get(key) is None:
                raise field_required(f"{path}.{key}")
        role = one_of(message["role"], f"{path}.role", ROLES)
        content = message["content"]
        cpath = f"{path}.content"
        if not isinstance(content, str | list):
            raise expected(cpath, "a string or a list")
        if isinstance(content, list) and not content:
            raise bad_request("at least one content block is required", cpath)
        if role == "system":
            self._system(content, cpath)
        elif isinstance(content, str):
            self.messages.append({"role": role, "content": content})
        elif role == "user":
            self._user(content, cpath)
        else:
            self._assistant(content, cpath)

    def _system(self, content: str | list[Any], path: str) -> None:
        text = system_text(content, path, strip_string=True)
        if self.merge_system:
            self.system += text
        elif text:
            self.messages.append({"role": "system", "content": text})

    def _user(self, blocks: list[Any], path: str) -> None:
        parts: list[dict[str, Any]] = []
        results = 0
        for j, block in enumerate(blocks):
            at = f"{path}[{j}]"
            kind = block_type(block, at)
            if kind == "text":
                parts.append({"type": "text", "text": text_of(block, at)})
            elif kind == "tool_result":
                self.messages.append(self._tool_result(block, at))
                results += 1
            elif kind in ("tool_use", "thinking", "redacted_thinking"):
                raise not_supported(f"{at}.type", kind, " in a user message")
            else:
                raise not_supported(f"{at}.type", kind)
        if parts or not results:
            self.messages.append({"role": "user", "content": parts})

    def _tool_result(self, block: dict[str, Any], path: str) -> dict[str, Any]:
        keys(block, TOOL_RESULT_KEYS, path)
        if block.get("tool_use_id") is None:
            raise field_required(f"{path}.tool_use_id")
        call_id = string(block["tool_use_id"], f"{path}.tool_use_id")
        if call_id not in self.call_ids:
            raise bad_request(f"tool_result for unknown tool_use_id '{call_id}'",
                              f"{path}.tool_use_id")
        content = block.get("content")
        text = "" if content is None else texts(content, f"{path}.content")
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise expected(f"{path}.is_error", "a boolean")
        cache_control(block, path)
        if is_error:
            text = "Error: " + text
        return {"role": "tool", "tool_call_id": call_id, "content": text}

    def _assistant(self, blocks: list[Any], path: str) -> None:
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for j, block in enumerate(blocks):
            at = f"{path}[{j}]"
            kind = block_type(block, at)
            if kind == "text":
                parts.append({"type": "text", "text": text_of(block, at)})
            elif kind == "tool_use":
                calls.append(self._tool_use(block, at))
            elif kind == "thinking":
                keys(block, THINKING_KEYS, at)
                if block.get("signature") is not None:
                    string(block["signature"], f"{at}.signature")
                if block.get("thinking") is None:
                    raise field_required(f"{at}.thinking")
                reasoning.append(string(block["thinking"], f"{at}.thinking"))
            elif kind == "redacted_thinking":
                # opaque (encrypted) reasoning of another server: nothing to render
                keys(block, REDACTED_THINKING_KEYS, at)
                if block.get("data") is None:
                    raise field_required(f"{at}.data")
                string(block["data"], f"{at}.data")
            elif kind == "tool_result":
                raise not_supported(f"{at}.type", kind, " in an assistant message")
            else:
                raise not_supported(f"{at}.type", kind)
        out: dict[str, Any] = {"role": "assistant"}
        if parts or not calls:
            out["content"] = parts
        if calls:
            out["tool_calls"] = calls
        if reasoning:
            out["reasoning_content"] = "".join(reasoning)
        self.messages.append(out)

    def _tool_use(self, block: dict[str, Any], path: str) -> dict[str, Any]:
        keys(block, TOOL_USE_KEYS, path)
        call_id = string(_need(block, "id", path), f"{path}.id")
        name = string(_need(block, "name", path), f"{path}.name")
        arguments = mapping(_need(block, "input", path), f"{path}.input")
        cache_control(block, path)
        self.call_ids.add(call_id)
        return {"id": call_id, "type": "function",
                "function": {"name": name, "arguments": _compact(arguments).decode()}}
