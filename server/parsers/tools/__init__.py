"""Tool calling: the request's ``tools`` / ``tool_choice``, the prompt prefill that forces
a call, and the streaming parser that turns generated text into tool calls.

Mirrors ``rust/server/src/parsers/tools.rs`` rule for rule. The formats (``--tool-call-parser``):

* ``demo``: the demo template's ``<｜tool▁call▁begin｜>{"name": N, "arguments": A}
  <｜tool▁call▁end｜>``;
* ``hermes``: ``<tool_call>{"name": N, "arguments": A}</tool_call>`` (Qwen, Hermes).

``auto`` picks ``demo`` when the chat template writes the demo markers, ``hermes`` when
it writes ``<tool_call>``, else none. ``tool_choice``:

* ``none``: the tools still go to the template; the output is not parsed;
* ``auto``: the output is parsed; text outside calls stays content. It never forces a
  call (no prefill);
* ``required``: the prompt is prefilled with the begin marker, so the output starts
  inside a call;
* a named function: prefilled with the begin marker and ``{"name": "N", "arguments": ``;
  generation stops at the first end marker.

Under ``required`` and a named function the engine also enforces the call format after the
prefill (:func:`forced_tag`, an xgrammar structural tag): each call's arguments follow its
function's ``parameters``; with ``parallel_tool_calls`` false, one call.

A call body is accepted when it is a JSON object with a string ``name`` and an
``arguments`` value (an object's raw JSON text is kept byte for byte; a JSON string is
used as its decoded text). A body that does not parse is given back as content, exactly
as generated. ``parallel_tool_calls: false`` keeps the first call only. Partial markers
at the end of a piece are held back until the next piece decides them.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import msgspec

from server.error import bad_request
from server.parsers.markers import held_suffix
from server.structured import compact


class ToolFormat(msgspec.Struct, frozen=True):
    begin: str
    end: str


# The formats parsed, by parser name (every name: server.parsers.select.TOOL_CALL_PARSERS; a
# name without a format here is accepted and parses nothing).
TOOL_CALL_PARSERS = {
    "demo": ToolFormat("<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"),
    "hermes": ToolFormat("<tool_call>", "</tool_call>"),
}

class ToolSettings(msgspec.Struct):
    """A chat request's tool settings, checked."""

    tools: list[dict[str, Any]] | None  # given to the template
    mode: str  # "none", "auto", "required" or "named"
    name: str | None  # the named function
    parallel: bool


def check_tools(tools: Any) -> list[dict[str, Any]] | None:
    """``tools`` checked: a list of ``{"type": "function", "function": {"name": ...}}``."""
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise bad_request("invalid value for `tools`: expected a list of tools", "tools")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function":
            raise bad_request("a tool must be an object with `type` \"function\"",
                              f"tools[{i}]")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise bad_request("a tool needs `function` with a string `name`",
                              f"tools[{i}].function")
    return tools


def tool_settings(request: Any, parser: str | None) -> ToolSettings:
    """Checks ``tools``, ``tool_choice`` and ``parallel_tool_calls`` (400 naming the field)."""
    tools = check_tools(request.tools)
    names = [tool["function"]["name"] for tool in tools or ()]
    choice = request.tool_choice
    name = None
    if choice is None:
        mode = "auto" if names else "none"
    elif choice in ("none", "auto", "required"):
        mode = choice
    elif (isinstance(choice, dict) and choice.get("type") == "function"
          and isinstance(choice.get("function"), dict)
          and isinstance(choice["function"].get("name"), str)):
        mode, name = "named", choice["function"]["name"]
    else:
        raise bad_request("`tool_choice` must be \"none\", \"auto\", \"required\" or "
                          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                          "tool_choice")
    if mode in ("required", "named") and not names:
        raise bad_request(f"`tool_choice` {choice_text(mode, name)} needs `tools`",
                          "tool_choice")
    if name is not None and name not in names:
        raise bad_request(f"`tool_choice` names the function `{name}`, which is not in "
                          "`tools`", "tool_choice")
    if mode != "none" and parser is None:
        raise bad_request(f"`tool_choice` {choice_text(mode, name)} needs a tool-call parser, "
                          "and this server has none for its chat template; start it with "
                          "--tool-call-parser", "tool_choice")
    parallel = request.parallel_tool_calls
    return ToolSettings(tools=tools if tools else None, mode=mode, name=name,
                        parallel=True if parallel is None else parallel)


def choice_text(mode: str, name: str | None) -> str:
    """How the messages name a forcing ``tool_choice``."""
    return f"naming `{name}`" if mode == "named" else f"\"{mode}\""


def prefill(fmt: ToolFormat, settings: ToolSettings) -> str | None:
    """Text appended to the prompt to force a call (None: nothing is forced)."""
    if settings.mode == "required":
        return fmt.begin
    if settings.mode == "named":
        return fmt.begin + call_prefix(settings.name or "")
    return None


def call_prefix(name: str) -> str:
    """The start of a named call's body, up to its arguments."""
    return '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '


_NO_PARAMETERS = {"type": "object", "properties": {}}


def _arguments(tool: dict[str, Any]) -> dict[str, Any]:
    """The structural-tag element of a call's arguments: the function's ``parameters``
    (an object with no properties when it has none), at most one whitespace in a row."""
    parameters = tool["function"].get("parameters")
    schema = parameters if isinstance(parameters, dict) else _NO_PARAMETERS
    return {"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1}


def _const(value: str) -> dict[str, Any]:
    return {"type": "const_string", "value": value}


def forced_tag(fmt: ToolFormat, settings: ToolSettings) -> str | None:
    """The xgrammar structural tag (compact JSON text) that constrains what follows the
    :func:`prefill` of a forced call to the tools' call format, each call's arguments to
    its function's ``parameters``; None when nothing is forced."""
    tools = settings.tools or []
    close = _const("}" + fmt.end)
    if settings.mode == "named":
        tool = next(t for t in tools if t["function"]["name"] == settings.name)
        form: dict[str, Any] = {"type": "sequence", "elements": [_arguments(tool), close]}
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


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class ToolCall(msgspec.Struct):
    id: str
    name: str
    arguments: str


# --------------------------------------------------------------------------- parsing

_WS = " \t\n\r"


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_no_constants)


def _object_spans(body: str) -> dict[str, tuple[int, int]] | None:
    """The top-level keys of a JSON object and the spans of their raw values."""
    i = _skip(body, 0)
    if i >= len(body) or body[i] != "{":
        return None
    i = _skip(body, i + 1)
    spans: dict[str, tuple[int, int]] = {}
    if i < len(body) and body[i] == "}":
        i += 1
    else:
        while True:
            if i >= len(body) or body[i] != '"':
                return None
            key, i = _DECODER.raw_decode(body, i)
            i = _skip(body, i)
            if i >= len(body) or body[i] != ":":
                return None
            start = _skip(body, i + 1)
            _, end = _DECODER.raw_decode(body, start)
            if key in spans and key in ("name", "arguments"):
                return None  # a duplicate field, as serde refuses it
            spans[key] = (start, end)
            i = _skip(body, end)
            if i < len(body) and body[i] == ",":
                i = _skip(body, i + 1)
                continue
            if i < len(body) and body[i] == "}":
                i += 1
                break
            return None
    return spans if _skip(body, i) == len(body) else None


def parse_call(body: str) -> tuple[str, str] | None:
    """(name, arguments) of a call body, or None when it is not a valid call."""
    try:
        spans = _object_spans(body)
        if spans is None or "name" not in spans or "arguments" not in spans:
            return None
        name = json.loads(body[slice(*spans["name"])])
        raw = body[slice(*spans["arguments"])]
        arguments = json.loads(raw) if raw.startswith('"') else raw
    except (ValueError, RecursionError):
        return None
    if not isinstance(name, str) or not isinstance(arguments, str):
        return None
    return name, arguments


class ToolCallParser:
    """Splits streamed text into content and tool calls (see the module docstring)."""

    __slots__ = ("_fmt", "_parallel", "_buffer", "_in_call", "_forced", "_given",
                 "calls_made")

    def __init__(self, fmt: ToolFormat, settings: ToolSettings) -> None:
        self._fmt = fmt
        self._parallel = settings.parallel
        self._buffer = ""
        forced = prefill(fmt, settings)
        # A forced call's opener (and a named call's body start) came from the prompt.
        self._in_call = self._forced = forced is not None
        self._given = forced[len(fmt.begin):] if forced is not None else ""
        self.calls_made = 0

    def push(self, text: str) -> tuple[str, list[ToolCall]]:
        """(content to emit now, calls completed by this piece)."""
        self._buffer += text
        content: list[str] = []
        calls: list[ToolCall] = []
        fmt = self._fmt
        while True:
            buffer = self._buffer
            if self._in_call:
                end = buffer.find(fmt.end)
                if end == -1:
                    break
                self._buffer = buffer[end + len(fmt.end):]
                self._close(buffer[:end], fmt.end, content, calls)
            else:
                begin = buffer.find(fmt.begin)
                if begin == -1:
                    keep = held_suffix(buffer, fmt.begin)
                    content.append(buffer[:len(buffer) - keep])
                    self._buffer = buffer[len(buffer) - keep:]
                    break
                content.append(buffer[:begin])
                self._buffer = buffer[begin + len(fmt.begin):]
                self._in_call = True
        return "".join(content), calls

    def finish(self) -> tuple[str, list[ToolCall]]:
        """The end of the output: an unterminated call is parsed as it stands."""
        content: list[str] = []
        calls: list[ToolCall] = []
        buffer, self._buffer = self._buffer, ""
        if self._in_call:
            self._close(buffer, "", content, calls)
        else:
            content.append(buffer)
        return "".join(content), calls

    def _close(self, generated: str, end: str, content: list[str],
               calls: list[ToolCall]) -> None:
        forced, given = self._forced, self._given
        self._in_call, self._forced, self._given = False, False, ""
        parsed = parse_call(given + generated)
        if parsed is None:  # not a call after all: the text as the model wrote it
            content.append(("" if forced else self._fmt.begin) + generated + end)
            return
        if self.calls_made and not self._parallel:
            return
        self.calls_made += 1
        calls.append(ToolCall(new_call_id(), parsed[0], parsed[1]))
