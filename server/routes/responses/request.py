"""A ``POST /v1/responses`` body -> the equivalent chat completions request (a dict), which
the chat prompt builder then takes unchanged; what only the Responses API has is checked
here, each refusal a 400 naming the field path. Mirrors
``rust/server/src/routes/responses/request.rs`` and ``input.rs``. Behaviour: docs/api.md,
"Responses API".
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from server.edge.error import bad_request
from server.validate.params import I64, I64_RANGE, decode_object, out_of_range

# Copied to the chat request under the same name (their values are checked there).
SAME = ("temperature", "top_p", "stop", "seed", "top_k", "user", "parallel_tool_calls")
HARMLESS = ("service_tier", "prompt_cache_key", "safety_identifier")
KNOWN = frozenset((
    "model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "text",
    "reasoning", "metadata", "stream", "stream_options", "store", "previous_response_id",
    "background", "conversation", "prompt", "include", "truncation", "top_logprobs",
    "max_tool_calls", *SAME, *HARMLESS))
STATELESS = "this server is stateless"
TEXT_PARTS = ("input_text", "output_text")
ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
TOOL_CHOICES = ("auto", "none", "required")
SUMMARIES = ("auto", "concise", "detailed")


class Echo(msgspec.Struct, kw_only=True):
    """What the response object repeats of the request (defaults filled in)."""

    instructions: str | None = None
    max_output_tokens: int | None = None
    parallel_tool_calls: bool = True
    effort: str | None = None
    summary: str | None = None
    temperature: Any = 1.0
    text_format: Any = msgspec.field(default_factory=lambda: {"type": "text"})
    tool_choice: Any = "auto"
    tools: list[Any] = msgspec.field(default_factory=list)
    top_p: Any = 1.0
    user: str | None = None
    metadata: dict[str, str] = msgspec.field(default_factory=dict)


class Translated(msgspec.Struct):
    chat: dict[str, Any]  # the chat completions request
    echo: Echo
    stream: bool


def _invalid(path: str, expected: str) -> Exception:
    return bad_request(f"invalid value for '{path}': expected {expected}", path)


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise _invalid(path, "a string")
    return value


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid(path, "an object")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if not isinstance(value, list):
        raise _invalid(path, "an array")
    return value


def _bool(value: Any, path: str) -> bool:
    if type(value) is not bool:
        raise _invalid(path, "a boolean")
    return value


def _refusals(raw: dict[str, Any]) -> None:
    """The stateful and unimplemented features: a 400 naming the field, never ignored."""
    for key in raw:
        if key not in KNOWN:
            raise bad_request(f"unknown field '{key}'", key)
    if raw.get("store") is not None and _bool(raw["store"], "store"):
        raise bad_request(f"store is not supported: {STATELESS}; send store=false", "store")
    for key in ("previous_response_id", "conversation", "prompt"):
        if raw.get(key) is not None:
            raise bad_request(f"{key} is not supported: {STATELESS}", key)
    if raw.get("background") is not None and _bool(raw["background"], "background"):
        raise bad_request(f"background is not supported: {STATELESS}", "background")
    include = raw.get("include")
    if include is not None and _list(include, "include"):
        raise bad_request("include is not supported: send no include list", "include")
    truncation = raw.get("truncation")
    if truncation is not None and _string(truncation, "truncation") != "disabled":
        raise bad_request(f"truncation '{truncation}' is not supported: only 'disabled'",
                          "truncation")
    top = raw.get("top_logprobs")
    if top is not None and (type(top) is not int or top != 0):
        raise bad_request("top_logprobs is not supported", "top_logprobs")
    if raw.get("max_tool_calls") is not None:
        raise bad_request("max_tool_calls is not supported", "max_tool_calls")
    for key in HARMLESS:
        if raw.get(key) is not None:
            _string(raw[key], key)


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


def messages(raw_input: Any, instructions: str | None) -> list[dict[str, Any]]:
    """``instructions`` and ``input`` as chat messages."""
    out: list[dict[str, Any]] = []
    if instructions is not None:
        out.append({"role": "system", "content": instructions})
    if isinstance(raw_input, str):
        out.append({"role": "user", "content": raw_input})
        return out
    if raw_input is None:
        raise bad_request("'input' is required", "input")
    items = _list(raw_input, "input")
    declared: set[str] = set()
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


def tools(raw: Any) -> list[dict[str, Any]]:
    """Function tools as chat tools; any other tool type is a 400."""
    out = []
    for i, tool in enumerate(_list(raw, "tools")):
        tool = _object(tool, f"tools[{i}]")
        kind = _string(tool.get("type"), f"tools[{i}].type")
        if kind != "function":
            raise bad_request(f"built-in tool '{kind}' is not supported: only function tools",
                              f"tools[{i}].type")
        function: dict[str, Any] = {"name": _string(tool.get("name"), f"tools[{i}].name")}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out


def tool_choice(raw: Any) -> Any:
    if isinstance(raw, str) and raw in TOOL_CHOICES:
        return raw
    if (isinstance(raw, dict) and raw.get("type") == "function"
            and isinstance(raw.get("name"), str)):
        return {"type": "function", "function": {"name": raw["name"]}}
    raise bad_request("invalid value for 'tool_choice': expected 'auto', 'none', 'required' "
                      "or {\"type\": \"function\", \"name\": ...}", "tool_choice")


def response_format(text: Any) -> tuple[dict[str, Any] | None, Any]:
    """(chat response_format or None, the format to echo) of the ``text`` field."""
    text = _object(text, "text")
    for key in text:
        if key not in ("format", "verbosity"):
            raise bad_request(f"unknown field 'text.{key}'", f"text.{key}")
    verbosity = text.get("verbosity")
    if verbosity is not None and verbosity != "medium":
        raise bad_request("text.verbosity is not supported: only 'medium'", "text.verbosity")
    fmt = text.get("format")
    if fmt is None:
        return None, {"type": "text"}
    fmt = _object(fmt, "text.format")
    kind = _string(fmt.get("type"), "text.format.type")
    if kind == "text":
        return None, fmt
    if kind == "json_object":
        return {"type": "json_object"}, fmt
    if kind == "json_schema":
        schema: dict[str, Any] = {"name": _string(fmt.get("name"), "text.format.name"),
                                  "schema": _object(fmt.get("schema"), "text.format.schema")}
        for key in ("description", "strict"):
            if fmt.get(key) is not None:
                schema[key] = fmt[key]
        return {"type": "json_schema", "json_schema": schema}, fmt
    raise bad_request(f"text.format type '{kind}' is not supported: expected text, "
                      "json_object or json_schema", "text.format.type")


def _reasoning(raw: Any, takes_effort: bool, echo: Echo) -> dict[str, Any] | None:
    """The chat template kwargs ``reasoning.effort`` asks for (None: nothing)."""
    raw = _object(raw, "reasoning")
    for key in raw:
        if key not in ("effort", "summary"):
            raise bad_request(f"unknown field 'reasoning.{key}'", f"reasoning.{key}")
    summary = raw.get("summary")
    if summary is not None and summary not in SUMMARIES:
        raise _invalid("reasoning.summary", "one of auto, concise, detailed")
    echo.summary = summary
    effort = raw.get("effort")
    if effort is None:
        return None
    echo.effort = _string(effort, "reasoning.effort")
    if not takes_effort:
        raise bad_request("this model's chat template takes no reasoning effort",
                          "reasoning.effort")
    return {"reasoning_effort": effort}


def _metadata(raw: Any) -> dict[str, str]:
    metadata = _object(raw, "metadata")
    if len(metadata) > 16:
        raise bad_request("metadata has more than 16 keys", "metadata")
    for key, value in metadata.items():
        _string(value, f"metadata.{key}")
    return metadata


# A chat field's name in the Responses body (errors of the chat checks name the latter).
_RENAMED = (("max_completion_tokens", "max_output_tokens"),
            ("response_format.json_schema", "text.format"), ("response_format", "text.format"),
            ("chat_template_kwargs", "reasoning.effort"))
_TOOL_FIELD = re.compile(r"^tools\[(\d+)\]\.function(\.|$)")


def responses_param(param: str | None) -> str | None:
    """The Responses name of the chat field ``param`` (``messages`` is ``input``; paths
    inside it are kept: chat messages do not map one to one onto input items)."""
    if param is None or param == "messages":
        return None if param is None else "input"
    for chat, ours in _RENAMED:
        if param == chat or param.startswith((chat + ".", chat + "[")):
            return ours + param[len(chat):] if chat != "chat_template_kwargs" else ours
    return _TOOL_FIELD.sub(lambda m: f"tools[{m.group(1)}]{m.group(2)}", param)


def translate(body: bytes, takes_effort: bool) -> Translated:
    """The chat request of a Responses body (``takes_effort``: the chat template reads
    ``reasoning_effort``)."""
    raw = decode_object(body)
    _refusals(raw)
    echo = Echo()
    chat: dict[str, Any] = {}
    if "model" in raw:
        chat["model"] = raw["model"]
    instructions = raw.get("instructions")
    if instructions is not None:
        echo.instructions = _string(instructions, "instructions")
    chat["messages"] = messages(raw.get("input"), echo.instructions)
    if raw.get("tools") is not None:
        chat["tools"] = tools(raw["tools"])
        echo.tools = raw["tools"]
    if raw.get("tool_choice") is not None:
        chat["tool_choice"] = tool_choice(raw["tool_choice"])
        echo.tool_choice = raw["tool_choice"]
    limit = raw.get("max_output_tokens")
    if limit is not None:
        if out_of_range(limit, *I64):
            raise bad_request(f"invalid value for 'max_output_tokens': {I64_RANGE}",
                              "max_output_tokens")
        if type(limit) is not int or limit < 1:
            raise _invalid("max_output_tokens", "an integer >= 1")
        chat["max_completion_tokens"] = echo.max_output_tokens = limit
    for key in SAME:
        if raw.get(key) is not None:
            chat[key] = raw[key]
    if raw.get("parallel_tool_calls") is not None:
        echo.parallel_tool_calls = _bool(raw["parallel_tool_calls"], "parallel_tool_calls")
    if raw.get("temperature") is not None:
        echo.temperature = raw["temperature"]
    if raw.get("top_p") is not None:
        echo.top_p = raw["top_p"]
    if raw.get("user") is not None:
        echo.user = _string(raw["user"], "user")
    if raw.get("text") is not None:
        fmt, echo.text_format = response_format(raw["text"])
        if fmt is not None:
            chat["response_format"] = fmt
    if raw.get("reasoning") is not None:
        kwargs = _reasoning(raw["reasoning"], takes_effort, echo)
        if kwargs is not None:
            chat["chat_template_kwargs"] = kwargs
    if raw.get("metadata") is not None:
        echo.metadata = _metadata(raw["metadata"])
    stream = False
    if raw.get("stream") is not None:
        stream = chat["stream"] = _bool(raw["stream"], "stream")
    options = raw.get("stream_options")
    if options is not None:
        for key, value in _object(options, "stream_options").items():
            if key != "include_obfuscation":
                raise bad_request(f"unknown field 'stream_options.{key}'",
                                  f"stream_options.{key}")
            _bool(value, "stream_options.include_obfuscation")
    return Translated(chat, echo, stream)
