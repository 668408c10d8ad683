"""A chat request's tool settings: ``tools``, ``tool_choice`` and ``parallel_tool_calls``
checked (400 naming the field) into a :class:`ToolSettings`. Rust:
rust/server/src/parsers/tools/settings.rs. Behaviour: docs/api.md, "Tool calls".
"""

from __future__ import annotations

from typing import Any

import msgspec

from server.edge.error import bad_request


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


def tool_names(settings: ToolSettings) -> frozenset[str]:
    """The function names a call may have."""
    return frozenset(t["function"]["name"] for t in settings.tools or ())


def property_types(settings: ToolSettings, name: str) -> dict[str, Any]:
    """Function ``name``'s ``parameters.properties`` (empty when it has none)."""
    for tool in settings.tools or ():
        function = tool["function"]
        if function["name"] == name:
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            return properties if isinstance(properties, dict) else {}
    return {}
