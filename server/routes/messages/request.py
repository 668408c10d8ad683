"""An Anthropic Messages body -> the equivalent chat completions request (a dict the chat
prompt builder takes), or a 400 naming the field path. Mirrors
``rust/server/src/routes/messages/request.rs``. Behaviour: docs/api.md, "Anthropic Messages
API", "Request fields".
"""

from __future__ import annotations

from typing import Any

import msgspec

from server.edge.error import APIError, bad_request
from server.validate.params import I64, I64_RANGE, decode_object, out_of_range

TOP_LEVEL = ("model", "messages", "max_tokens", "system", "tools", "tool_choice",
             "stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata",
             "thinking", "service_tier", "seed", "container", "mcp_servers",
             "context_management")
REFUSED = ("container", "mcp_servers", "context_management")
MIN_THINKING_BUDGET = 1024
# block type -> the keys it may carry (besides ``type``); ``cache_control`` is accepted
# and has no effect (there is no prompt cache to steer)
TEXT_KEYS = ("text", "cache_control", "citations")
TOOL_RESULT_KEYS = ("tool_use_id", "content", "is_error", "cache_control")
TOOL_USE_KEYS = ("id", "name", "input", "cache_control")
THINKING_KEYS = ("thinking", "signature")
TOOL_KEYS = ("name", "description", "input_schema", "type", "cache_control")
_compact = msgspec.json.Encoder().encode


def field_required(path: str) -> APIError:
    return bad_request("Field required", path)


def expected(path: str, what: str) -> APIError:
    return bad_request(f"invalid value: expected {what}", path)


def unknown_field(path: str, name: str) -> APIError:
    return bad_request(f"unknown field '{name}'", path)


def not_supported(path: str, kind: str) -> APIError:
    return bad_request(f"content block type '{kind}' is not supported", path)


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise expected(path, "a string")
    return value


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise expected(path, "an object")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise expected(path, "a list")
    return value


def _integer(value: Any, path: str, least: int | None = None) -> int:
    """An integer (``least`` or more); a number outside the i64 range is refused as out of
    range, as in Rust."""
    if out_of_range(value, *I64):
        raise bad_request(f"invalid value: {I64_RANGE}", path)
    if least is None:
        if type(value) is not int:
            raise expected(path, "an integer")
        return value
    if type(value) is not int or value < least:
        raise expected(path, f"an integer >= {least}")
    return value


def _number(value: Any, path: str) -> float | int:
    if type(value) is not int and type(value) is not float:
        raise expected(path, "a number")
    return value


def _keys(item: dict[str, Any], allowed: tuple[str, ...], path: str) -> None:
    for key in item:
        if key != "type" and key not in allowed:
            raise unknown_field(f"{path}.{key}", key)


def _block_type(block: Any, path: str) -> str:
    block = _object(block, path)
    if "type" not in block:
        raise field_required(f"{path}.type")
    return _string(block["type"], f"{path}.type")


def _text_of(block: dict[str, Any], path: str) -> str:
    _keys(block, TEXT_KEYS, path)
    if "text" not in block:
        raise field_required(f"{path}.text")
    return _string(block["text"], f"{path}.text")


def _texts(value: Any, path: str) -> str:
    """A string, or a list of text blocks joined with "\\n"."""
    if isinstance(value, str):
        return value
    parts = []
    for k, block in enumerate(_list(value, path)):
        kind = _block_type(block, f"{path}[{k}]")
        if kind != "text":
            raise not_supported(f"{path}[{k}].type", kind)
        parts.append(_text_of(block, f"{path}[{k}]"))
    return "\n".join(parts)


class _Conversation:
    """The chat messages so far, and the tool_use ids the assistant turns declared."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.call_ids: set[str] = set()

    def add(self, message: Any, i: int) -> None:
        path = f"messages[{i}]"
        message = _object(message, path)
        _keys(message, ("role", "content"), path)
        for key in ("role", "content"):
            if key not in message:
                raise field_required(f"{path}.{key}")
        role = _string(message["role"], f"{path}.role")
        if role not in ("user", "assistant"):
            raise bad_request(f"invalid value: expected 'user' or 'assistant', got '{role}'",
                              f"{path}.role")
        content = message["content"]
        if isinstance(content, str):
            self.messages.append({"role": role, "content": content})
            return
        blocks = _list(content, f"{path}.content")
        if not blocks:
            raise bad_request("at least one content block is required", f"{path}.content")
        if role == "user":
            self._user(blocks, f"{path}.content")
        else:
            self._assistant(blocks, f"{path}.content")

    def _user(self, blocks: list[Any], path: str) -> None:
        parts: list[dict[str, Any]] = []
        for j, block in enumerate(blocks):
            at = f"{path}[{j}]"
            kind = _block_type(block, at)
            if kind == "text":
                parts.append({"type": "text", "text": _text_of(block, at)})
            elif kind == "tool_result":
                self.messages.append(self._tool_result(block, at))
            elif kind in ("tool_use", "thinking"):
                raise bad_request(f"content block type '{kind}' is not supported in a user "
                                  "message", f"{at}.type")
            else:
                raise not_supported(f"{at}.type", kind)
        if parts:
            self.messages.append({"role": "user", "content": parts})

    def _tool_result(self, block: dict[str, Any], path: str) -> dict[str, Any]:
        _keys(block, TOOL_RESULT_KEYS, path)
        if "tool_use_id" not in block:
            raise field_required(f"{path}.tool_use_id")
        call_id = _string(block["tool_use_id"], f"{path}.tool_use_id")
        if call_id not in self.call_ids:
            raise bad_request(f"tool_result for unknown tool_use_id '{call_id}'",
                              f"{path}.tool_use_id")
        content = block.get("content")
        text = "" if content is None else _texts(content, f"{path}.content")
        is_error = block.get("is_error")
        if is_error is not None and not isinstance(is_error, bool):
            raise expected(f"{path}.is_error", "a boolean")
        if is_error:
            text = "Error: " + text
        return {"role": "tool", "tool_call_id": call_id, "content": text}

    def _assistant(self, blocks: list[Any], path: str) -> None:
        parts: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for j, block in enumerate(blocks):
            at = f"{path}[{j}]"
            kind = _block_type(block, at)
            if kind == "text":
                parts.append({"type": "text", "text": _text_of(block, at)})
            elif kind == "tool_use":
                calls.append(self._tool_use(block, at))
            elif kind == "thinking":
                _keys(block, THINKING_KEYS, at)
                if "thinking" not in block:
                    raise field_required(f"{at}.thinking")
                reasoning.append(_string(block["thinking"], f"{at}.thinking"))
                if block.get("signature") is not None:
                    _string(block["signature"], f"{at}.signature")
            elif kind == "tool_result":
                raise bad_request("content block type 'tool_result' is not supported in an "
                                  "assistant message", f"{at}.type")
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
        _keys(block, TOOL_USE_KEYS, path)
        for key in ("id", "name", "input"):
            if key not in block:
                raise field_required(f"{path}.{key}")
        call_id = _string(block["id"], f"{path}.id")
        name = _string(block["name"], f"{path}.name")
        arguments = _object(block["input"], f"{path}.input")
        self.call_ids.add(call_id)
        return {"id": call_id, "type": "function",
                "function": {"name": name, "arguments": _compact(arguments).decode()}}


def _tools(value: Any) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(_list(value, "tools")):
        path = f"tools[{i}]"
        tool = _object(tool, path)
        kind = tool.get("type")
        if kind is not None and kind != "custom":
            if not isinstance(kind, str):
                raise expected(f"{path}.type", "a string")
            raise bad_request(f"tool type '{kind}' is not supported: only custom tools "
                              "(name, description, input_schema)", f"{path}.type")
        _keys(tool, TOOL_KEYS, path)
        for key in ("name", "input_schema"):
            if key not in tool:
                raise field_required(f"{path}.{key}")
        function: dict[str, Any] = {"name": _string(tool["name"], f"{path}.name")}
        if tool.get("description") is not None:
            function["description"] = _string(tool["description"], f"{path}.description")
        function["parameters"] = _object(tool["input_schema"], f"{path}.input_schema")
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(value: Any, chat: dict[str, Any]) -> None:
    choice = _object(value, "tool_choice")
    if "type" not in choice:
        raise field_required("tool_choice.type")
    kind = _string(choice["type"], "tool_choice.type")
    allowed = {"auto": ("disable_parallel_tool_use",), "any": ("disable_parallel_tool_use",),
               "tool": ("name", "disable_parallel_tool_use"), "none": ()}
    if kind not in allowed:
        raise bad_request(f"invalid value: expected 'auto', 'any', 'tool' or 'none', got "
                          f"'{kind}'", "tool_choice.type")
    _keys(choice, allowed[kind], "tool_choice")
    if kind == "tool":
        if "name" not in choice:
            raise field_required("tool_choice.name")
        chat["tool_choice"] = {"type": "function", "function": {
            "name": _string(choice["name"], "tool_choice.name")}}
    else:
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise expected("tool_choice.disable_parallel_tool_use", "a boolean")
    if disable:
        chat["parallel_tool_calls"] = False


def _thinking(value: Any, max_tokens: int | None, reasoning: bool) -> bool:
    thinking = _object(value, "thinking")
    if "type" not in thinking:
        raise field_required("thinking.type")
    kind = _string(thinking["type"], "thinking.type")
    if kind == "disabled":
        _keys(thinking, (), "thinking")
        return False
    if kind != "enabled":
        raise bad_request(f"invalid value: expected 'enabled' or 'disabled', got '{kind}'",
                          "thinking.type")
    _keys(thinking, ("budget_tokens",), "thinking")
    if "budget_tokens" not in thinking:
        raise field_required("thinking.budget_tokens")
    budget = _integer(thinking["budget_tokens"], "thinking.budget_tokens",
                      MIN_THINKING_BUDGET)
    if max_tokens is not None and budget >= max_tokens:
        raise bad_request(f"budget_tokens ({budget}) must be less than max_tokens "
                          f"({max_tokens})", "thinking.budget_tokens")
    if not reasoning:
        raise bad_request("thinking needs a reasoning parser: start the server with "
                          "--reasoning-parser", "thinking")
    return True


def _metadata(value: Any, chat: dict[str, Any]) -> None:
    metadata = _object(value, "metadata")
    _keys(metadata, ("user_id",), "metadata")
    user = metadata.get("user_id")
    if user is not None:
        chat["user"] = _string(user, "metadata.user_id")


def translate(body: bytes, *, reasoning: bool, count: bool = False) -> dict[str, Any]:
    """The chat request equivalent to the Messages ``body`` (``reasoning``: the server has a
    reasoning parser; ``count``: a count_tokens body, without max_tokens in the answer)."""
    raw = decode_object(body)
    for key in raw:
        if key not in TOP_LEVEL:
            raise unknown_field(key, key)
    for key, value in raw.items():  # the first refused field in body order, as Rust
        if key in REFUSED and value is not None:
            raise bad_request(f"{key} is not supported by this server", key)
    if count and "stream" in raw:
        raise bad_request("stream is not supported by count_tokens", "stream")
    if "model" not in raw:
        raise field_required("model")
    chat: dict[str, Any] = {"model": _string(raw["model"], "model")}
    max_tokens = None
    if raw.get("max_tokens") is not None or not count:
        if "max_tokens" not in raw:
            raise field_required("max_tokens")
        max_tokens = _integer(raw["max_tokens"], "max_tokens", 1)
    if "messages" not in raw:
        raise field_required("messages")
    conversation = _Conversation()
    if raw.get("system") is not None:
        conversation.messages.append({"role": "system",
                                      "content": _texts(raw["system"], "system")})
    messages = _list(raw["messages"], "messages")
    if not messages:
        raise bad_request("at least one message is required", "messages")
    for i, message in enumerate(messages):
        conversation.add(message, i)
    chat["messages"] = conversation.messages
    if max_tokens is not None and not count:
        chat["max_tokens"] = max_tokens
    _options(raw, chat, max_tokens, reasoning)
    return chat


def _options(raw: dict[str, Any], chat: dict[str, Any], max_tokens: int | None,
             reasoning: bool) -> None:
    """The fields after ``messages``, in check order, into ``chat``."""
    if raw.get("tools") is not None:
        chat["tools"] = _tools(raw["tools"])
    if raw.get("tool_choice") is not None:
        _tool_choice(raw["tool_choice"], chat)
    if raw.get("stop_sequences") is not None:
        stops = _list(raw["stop_sequences"], "stop_sequences")
        chat["stop"] = [_string(stop, f"stop_sequences[{k}]") for k, stop in enumerate(stops)]
    for key in ("temperature", "top_p"):
        if raw.get(key) is not None:
            chat[key] = _number(raw[key], key)
    if raw.get("top_k") is not None:
        chat["top_k"] = _integer(raw["top_k"], "top_k", 0)
    if raw.get("seed") is not None:
        chat["seed"] = _integer(raw["seed"], "seed")
    if raw.get("stream") is not None:
        if not isinstance(raw["stream"], bool):
            raise expected("stream", "a boolean")
        chat["stream"] = raw["stream"]
    if raw.get("metadata") is not None:
        _metadata(raw["metadata"], chat)
    if raw.get("service_tier") is not None:
        _string(raw["service_tier"], "service_tier")
    if raw.get("thinking") is not None:
        enabled = _thinking(raw["thinking"], max_tokens, reasoning)
        chat["chat_template_kwargs"] = {"enable_thinking": enabled}
