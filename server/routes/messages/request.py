"""An Anthropic Messages body -> the equivalent chat completions request (a dict the chat
prompt builder takes), or a 400 naming the field path. Mirrors
``rust/server/src/routes/messages/request.rs``. Behaviour: docs/api.md, "Anthropic Messages
API", "Request fields".
"""

from __future__ import annotations

from typing import Any

from server.edge.error import bad_request
from server.routes.messages.blocks import messages
from server.routes.messages.json import (
    cache_control,
    expected,
    field_required,
    integer,
    keys,
    mapping,
    number,
    one_of,
    sequence,
    string,
    system_text,
    unknown_field,
)
from server.validate.params import decode_object

TOP_LEVEL = ("model", "messages", "max_tokens", "system", "tools", "tool_choice",
             "stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata",
             "thinking", "output_config", "cache_control", "service_tier", "seed",
             "container", "mcp_servers", "context_management")
REFUSED = ("container", "mcp_servers", "context_management")
MIN_THINKING_BUDGET = 1024
TOOL_KEYS = ("type", "name", "description", "input_schema", "type", "cache_control")
THINKING_DISPLAYS = ("summarized", "omitted", "updates")
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# The chat request's structured-output field and the Messages field it comes from.
_FORMAT = ("response_format", "output_config.format")


def _tools(value: Any) -> list[dict[str, Any]]:
    out = []
    for i, tool in enumerate(sequence(value, "tools")):
        path = f"tools[{i}]"
        tool = mapping(tool, path)
        kind = tool.get("type")
        if kind is not None and string(kind, f"{path}.type") != "custom":
            raise bad_request(f"tool type '{kind}' is not supported: only custom tools "
                              "(name, description, input_schema)", f"{path}.type")
        keys(tool, TOOL_KEYS, path)
        if tool.get("name") is None:
            raise field_required(f"{path}.name")
        function: dict[str, Any] = {"name": string(tool["name"], f"{path}.name")}
        if tool.get("input_schema") is None:
            raise field_required(f"{path}.input_schema")
        schema = mapping(tool["input_schema"], f"{path}.input_schema")
        if tool.get("description") is not None:
            function["description"] = string(tool["description"], f"{path}.description")
        function["parameters"] = schema
        cache_control(tool, path)
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(value: Any, chat: dict[str, Any]) -> None:
    choice = mapping(value, "tool_choice")
    if choice.get("type") is None:
        raise field_required("tool_choice.type")
    kind = one_of(choice["type"], "tool_choice.type", ("auto", "any", "tool", "none"))
    allowed = {"auto": ("type", "disable_parallel_tool_use"),
               "any": ("type", "disable_parallel_tool_use"),
               "tool": ("type", "disable_parallel_tool_use", "name"), "none": ("type",)}
    keys(choice, allowed[kind], "tool_choice")
    if kind == "tool":
        if choice.get("name") is None:
            raise field_required("tool_choice.name")
        chat["tool_choice"] = {"type": "function", "function": {
            "name": string(choice["name"], "tool_choice.name")}}
    else:
        chat["tool_choice"] = {"auto": "auto", "any": "required", "none": "none"}[kind]
    disable = choice.get("disable_parallel_tool_use")
    if disable is not None and not isinstance(disable, bool):
        raise expected("tool_choice.disable_parallel_tool_use", "a boolean")
    if disable:
        chat["parallel_tool_calls"] = False


def _thinking(value: Any, max_tokens: int | None,
              reasoning: bool) -> tuple[bool | None, int | None]:
    """``enable_thinking`` for the template, True (enabled), False (disabled) or None
    (adaptive: the template's default, as vLLM pins nothing); and the thinking budget
    (enabled: ``budget_tokens``, enforced by the engine as vLLM maps it)."""
    thinking = mapping(value, "thinking")
    if thinking.get("type") is None:
        raise field_required("thinking.type")
    kind = one_of(thinking["type"], "thinking.type", ("enabled", "disabled", "adaptive"))
    if kind == "disabled":
        keys(thinking, ("type",), "thinking")
        return False, None
    keys(thinking, ("type", "budget_tokens", "display") if kind == "enabled"
         else ("type", "display"), "thinking")
    if thinking.get("display") is not None:
        one_of(thinking["display"], "thinking.display", THINKING_DISPLAYS)
    if kind == "adaptive":
        return None, None
    if thinking.get("budget_tokens") is None:
        raise field_required("thinking.budget_tokens")
    budget = integer(thinking["budget_tokens"], "thinking.budget_tokens", MIN_THINKING_BUDGET)
    if max_tokens is not None and budget >= max_tokens:
        raise bad_request(f"budget_tokens ({budget}) must be less than max_tokens "
                          f"({max_tokens})", "thinking.budget_tokens")
    if not reasoning:
        raise bad_request("thinking needs a reasoning parser: start the server with "
                          "--reasoning-parser", "thinking")
    return True, budget


def _output_config(value: Any, chat: dict[str, Any]) -> str | None:
    """``output_config``: its ``format`` as chat's ``response_format``; its ``effort``."""
    config = mapping(value, "output_config")
    keys(config, ("effort", "format"), "output_config")
    effort = config.get("effort")
    if effort is not None:
        one_of(effort, "output_config.effort", EFFORTS)
    if config.get("format") is not None:
        fmt = mapping(config["format"], "output_config.format")
        keys(fmt, ("type", "schema"), "output_config.format")
        if fmt.get("type") is not None:
            one_of(fmt["type"], "output_config.format.type", ("json_schema",))
        if fmt.get("schema") is None:
            raise field_required("output_config.format.schema")
        schema = mapping(fmt["schema"], "output_config.format.schema")
        chat["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "json_schema", "schema": schema}}
    return effort


def _template_kwargs(thinking: bool | None, effort: str | None) -> dict[str, Any]:
    """What ``thinking`` and ``output_config.effort`` ask of the chat template: the effort
    as vLLM hands it over (``reasoning_effort``, with ``enable_thinking``), unless thinking
    is disabled."""
    kwargs: dict[str, Any] = {}
    if effort is not None and thinking is not False:
        kwargs.update(reasoning_effort=effort, enable_thinking=True)
    if thinking is not None:
        kwargs["enable_thinking"] = thinking
    return kwargs


def _metadata(value: Any, chat: dict[str, Any]) -> None:
    metadata = mapping(value, "metadata")
    keys(metadata, ("user_id",), "metadata")
    user = metadata.get("user_id")
    if user is not None:
        chat["user"] = string(user, "metadata.user_id")


def translate(body: bytes, *, reasoning: bool, count: bool = False,
              merge_system: bool = True) -> dict[str, Any]:
    """The chat request equivalent to the Messages ``body`` (``reasoning``: the server has a
    reasoning parser; ``count``: a count_tokens body, without max_tokens in the answer;
    ``merge_system``: the chat template takes no system message after the first, so a
    ``system`` message joins the system prompt)."""
    raw = decode_object(body)
    for key in raw:
        if key not in TOP_LEVEL:
            raise unknown_field(key, key)
    for key, value in raw.items():  # the first refused field in body order, as Rust
        if key in REFUSED and value is not None:
            raise bad_request(f"{key} is not supported by this server", key)
    if count and "stream" in raw:
        raise bad_request("stream is not supported by count_tokens", "stream")
    if raw.get("model") is None:
        raise field_required("model")
    chat: dict[str, Any] = {"model": string(raw["model"], "model")}
    max_tokens = None
    if raw.get("max_tokens") is not None or not count:
        if raw.get("max_tokens") is None:
            raise field_required("max_tokens")
        max_tokens = integer(raw["max_tokens"], "max_tokens", 1)
    if raw.get("messages") is None:
        raise field_required("messages")
    system = "" if raw.get("system") is None else system_text(raw["system"], "system", False)
    listed = raw["messages"]
    if not isinstance(listed, list):
        raise expected("messages", "a list")
    if not listed:
        raise bad_request("at least one message is required", "messages")
    chat["messages"] = messages(listed, system, merge_system)
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
        stops = sequence(raw["stop_sequences"], "stop_sequences")
        chat["stop"] = [string(stop, f"stop_sequences[{k}]") for k, stop in enumerate(stops)]
    for key in ("temperature", "top_p"):
        if raw.get(key) is not None:
            chat[key] = number(raw[key], key)
    if raw.get("top_k") is not None:
        chat["top_k"] = integer(raw["top_k"], "top_k", 0)
    if raw.get("seed") is not None:
        chat["seed"] = integer(raw["seed"], "seed")
    if raw.get("stream") is not None:
        if not isinstance(raw["stream"], bool):
            raise expected("stream", "a boolean")
        chat["stream"] = raw["stream"]
    if raw.get("metadata") is not None:
        _metadata(raw["metadata"], chat)
    if raw.get("service_tier") is not None:
        string(raw["service_tier"], "service_tier")
    thinking, budget = None, None
    if raw.get("thinking") is not None:
        thinking, budget = _thinking(raw["thinking"], max_tokens, reasoning)
    effort = None
    if raw.get("output_config") is not None:
        effort = _output_config(raw["output_config"], chat)
    cache_control(raw, "")
    kwargs = _template_kwargs(thinking, effort)
    if kwargs:
        chat["chat_template_kwargs"] = kwargs
    if budget is not None:  # enforced by the engine, as vLLM maps it
        chat["thinking_token_budget"] = budget


def messages_param(param: str | None) -> str | None:
    """The Messages name of the chat request's field ``param`` (the chat checks' errors
    and an engine's refusal of the structured-output constraint name the former)."""
    chat, ours = _FORMAT
    if param is None or not (param == chat or param.startswith((chat + ".", chat + "["))):
        return param
    rest = param[len(chat):].removeprefix(".json_schema")
    return ours + rest
