"""A ``POST /v1/responses`` body -> the equivalent chat completions request (a dict), which
the chat prompt builder then takes unchanged; what only the Responses API has is checked
here, each refusal a 400 naming the field path. Mirrors
``rust/server/src/routes/responses/request.rs``. Behaviour: docs/api.md,
"Responses API".
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from server.edge.error import bad_request
from server.routes.responses.fields import boolean as _bool
from server.routes.responses.fields import invalid as _invalid
from server.routes.responses.fields import mapping as _object
from server.routes.responses.fields import sequence as _list
from server.routes.responses.fields import string as _string
from server.routes.responses.input import messages
from server.validate.params import I64, I64_RANGE, decode_object, out_of_range

# Copied to the chat request under the same name (their values are checked there).
SAME = ("temperature", "top_p", "stop", "seed", "top_k", "user", "parallel_tool_calls")
# vLLM's extensions of the Responses request that chat takes too: copied the same way.
EXTRAS = ("min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
          "stop_token_ids", "ignore_eos", "skip_special_tokens", "logit_bias",
          "structured_outputs")
HARMLESS = ("service_tier", "prompt_cache_key", "safety_identifier")
# vLLM's extensions of the Responses request that only it has (the response's id, the raw
# prompt and output in the response object).
OWN = ("request_id", "enable_response_messages")
KNOWN = frozenset((
    "model", "input", "instructions", "tools", "tool_choice", "max_output_tokens", "text",
    "reasoning", "metadata", "stream", "stream_options", "store", "previous_response_id",
    "background", "conversation", "prompt", "include", "truncation", "top_logprobs",
    "max_tool_calls", "chat_template_kwargs", *SAME, *EXTRAS, *HARMLESS, *OWN))
# What ``include`` may ask for: the output text's logprobs; the others concern built-in
# tools, images and encrypted reasoning this server does not produce (accepted, no effect,
# as vLLM takes them).
LOGPROBS = "message.output_text.logprobs"
INCLUDABLE = ("code_interpreter_call.outputs", "computer_call_output.output.image_url",
              "file_search_call.results", "message.input_image.image_url", LOGPROBS,
              "reasoning.encrypted_content")
MAX_TOP_LOGPROBS = 20
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
    top_logprobs: int = 0
    request_id: str | None = None  # vLLM's: the response's id (None: resp_<hex>)
    response_messages: bool = False  # enable_response_messages: the raw prompt and output


class Translated(msgspec.Struct):
    chat: dict[str, Any]  # the chat completions request
    echo: Echo
    stream: bool


def _refusals(raw: dict[str, Any]) -> None:
    """The unimplemented features: a 400 naming the field, never ignored; the types of
    the stateful fields (their meaning: server/routes/responses/store.py)."""
    for key in raw:
        if key not in KNOWN:
            raise bad_request(f"unknown field '{key}'", key)
    if raw.get("store") is not None:
        _bool(raw["store"], "store")
    if raw.get("previous_response_id") is not None:
        _string(raw["previous_response_id"], "previous_response_id")
    for key in ("conversation", "prompt"):
        if raw.get(key) is not None:
            raise bad_request(f"{key} is not supported", key)
    if raw.get("background") is not None and _bool(raw["background"], "background") \
            and not raw.get("store", True):
        raise bad_request("background can only be used when `store` is true", "background")
    include = raw.get("include")
    for i, item in enumerate([] if include is None else _list(include, "include")):
        if item not in INCLUDABLE:
            raise _invalid(f"include[{i}]", "one of " + ", ".join(INCLUDABLE))
    truncation = raw.get("truncation")
    if truncation is not None and _string(truncation, "truncation") != "disabled":
        raise bad_request(f"truncation '{truncation}' is not supported: only 'disabled'",
                          "truncation")
    top = raw.get("top_logprobs")
    if top is not None and (type(top) is not int or not 0 <= top <= MAX_TOP_LOGPROBS):
        raise _invalid("top_logprobs", f"an integer from 0 to {MAX_TOP_LOGPROBS}")
    if raw.get("max_tool_calls") is not None:
        raise bad_request("max_tool_calls is not supported", "max_tool_calls")
    for key in HARMLESS:
        if raw.get(key) is not None:
            _string(raw[key], key)


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


def _reasoning(raw: Any, echo: Echo) -> str | None:
    """The chat ``reasoning_effort`` of ``reasoning.effort`` (None: nothing)."""
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
    return echo.effort


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
            ("reasoning_effort", "reasoning.effort"))
_TOOL_FIELD = re.compile(r"^tools\[(\d+)\]\.function(\.|$)")


def responses_param(param: str | None) -> str | None:
    """The Responses name of the chat field ``param`` (``messages`` is ``input``; paths
    inside it are kept: chat messages do not map one to one onto input items)."""
    if param is None or param == "messages":
        return None if param is None else "input"
    for chat, ours in _RENAMED:
        if param == chat or param.startswith((chat + ".", chat + "[")):
            return ours + param[len(chat):]
    return _TOOL_FIELD.sub(lambda m: f"tools[{m.group(1)}]{m.group(2)}", param)


def translate(body: bytes, known_calls: frozenset[str] = frozenset()) -> Translated:
    """The chat request of a Responses body (``known_calls``: as :func:`messages`)."""
    raw = decode_object(body)
    _refusals(raw)
    echo = Echo()
    chat: dict[str, Any] = {}
    if "model" in raw:
        chat["model"] = raw["model"]
    instructions = raw.get("instructions")
    if instructions is not None:
        echo.instructions = _string(instructions, "instructions")
    chat["messages"] = messages(raw.get("input"), echo.instructions, known_calls)
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
        effort = _reasoning(raw["reasoning"], echo)
        if effort is not None:
            chat["reasoning_effort"] = effort
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
    _extras(raw, chat, echo)
    return Translated(chat, echo, stream)


def _extras(raw: dict[str, Any], chat: dict[str, Any], echo: Echo) -> None:
    """``include``'s logprobs, vLLM's extensions (``request_id`` and
    ``enable_response_messages`` into ``echo``) and ``chat_template_kwargs`` into ``chat``
    (where chat's ``reasoning_effort``, from ``reasoning.effort``, wins over the kwargs' own)."""
    echo.top_logprobs = raw.get("top_logprobs") or 0
    if LOGPROBS in (raw.get("include") or []):
        chat["logprobs"] = True
        chat["top_logprobs"] = echo.top_logprobs
    for key in EXTRAS:
        if raw.get(key) is not None:
            chat[key] = raw[key]
    if raw.get("structured_outputs") is not None and raw.get("text") is not None \
            and raw["text"].get("format") is not None:
        raise bad_request("only one structured-output constraint may be given; this request "
                          "sets `text.format` and `structured_outputs`", "structured_outputs")
    kwargs = raw.get("chat_template_kwargs")
    if kwargs is not None:
        chat["chat_template_kwargs"] = _object(kwargs, "chat_template_kwargs")
    if raw.get("request_id") is not None:
        echo.request_id = _string(raw["request_id"], "request_id")
    if raw.get("enable_response_messages") is not None:
        echo.response_messages = _bool(raw["enable_response_messages"],
                                       "enable_response_messages")
        if echo.response_messages:
            chat["return_token_ids"] = True  # the pieces carry the output's token ids
