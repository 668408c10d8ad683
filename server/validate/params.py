"""Request bodies to validated generation settings; every error names its field.

Mirrors ``rust/server/src/validate/params.rs`` rule for rule, in the same order, so that both
frontends answer a bad request with the same status, type and ``param``:

1. the body must be a non-empty JSON object;
2. keys: a known-but-unimplemented key with a value that asks for something is refused
   (:func:`refusal`, keys in sorted order); then unknown keys are refused together;
3. types (``invalid value for `path`: ...``, param = the path);
4. values (:func:`validate`), the structured-output constraint last
   (:mod:`server.validate.structured`); the model (404) is checked by the caller after this.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from engine import protocol as p
from server import openai as s
from server.edge.error import APIError, bad_request
from server.text import NO_CHAT_TEMPLATE
from server.validate import guided, structured
from server.validate import sampling as sampling_fields
from server.validate.extras import Extras, message_reasoning
from server.validate.tool_calls import template_tool_calls

I64 = (-(2**63), 2**63 - 1)
U32_END = 2**32
# How an integer field's number out of range is refused (as rust/server/src/openai/ints.rs).
I64_RANGE = "the number is out of range for i64 (-9223372036854775808 to 9223372036854775807)"
U32_RANGE = "the number is out of range for u32 (0 to 4294967295)"

_CHAT_DECODER = msgspec.json.Decoder(s.ChatCompletionRequest)
_COMPLETION_DECODER = msgspec.json.Decoder(s.CompletionRequest)
_KNOWN = {True: s.COMMON_FIELDS | s.CHAT_FIELDS, False: s.COMMON_FIELDS | s.COMPLETION_FIELDS}
_POLICY_FIELDS = {
    chat: tuple(sorted(set(cls.__struct_fields__) - _KNOWN[chat]))
    for chat, cls in ((True, s.ChatCompletionRequest), (False, s.CompletionRequest))
}
_INT_FIELDS = ("max_tokens", "top_k", "seed", "min_tokens", "max_completion_tokens", "n",
               "logprobs", "top_logprobs", "prompt_logprobs", "truncate_prompt_tokens")
_U32_LISTS = ("stop_token_ids", "tokens")  # lists of token ids (u32)
MAX_N = 128
MAX_LOGPROBS = sampling_fields.MAX_LOGPROBS


class BeamSearch(msgspec.Struct):
    """``use_beam_search``: ``width`` (the request's ``n``) beams ranked by their cumulative
    logprob over their length to the power ``length_penalty``. What may go with it:
    :mod:`server.validate.beam_search`; the search: :mod:`server.output.beam_search`."""

    width: int
    length_penalty: float = 1.0


class Settings(msgspec.Struct):
    """Checked generation settings (``sampling.max_tokens`` is set once the prompt is known;
    ``sampling.logprobs`` by :func:`chat_logprobs` / :func:`completion_output`)."""

    sampling: p.SamplingParams
    max_tokens: int | None
    stop: list[str]
    skip_special_tokens: bool
    stream: bool
    include_usage: bool
    model: str | None
    n: int = 1
    echo: bool = False
    # where max_tokens came from (chat's max_completion_tokens, or max_tokens), for errors
    max_tokens_field: str = "max_tokens"
    continuous_usage: bool = False  # stream_options.continuous_usage_stats (with usage)
    bad_words: list[str] = []  # tokenized into sampling.bad_words_token_ids by the caller
    prompt_logprobs: int | None = None  # the request's prompt_logprobs (what is shown)
    echo_logprobs: int | None = None  # completions: echo with logprobs k
    echo_only: bool = False  # completions: max_tokens 0 with echo (the prompt only)
    # the field that set sampling.structured_outputs (the param of its engine errors)
    constraint: str | None = None
    # The engine request's own fields (server.validate.engine_fields).
    priority: int = 0
    cache_salt: str | None = None
    # use_beam_search (None: sampling); checked by server.validate.beam_search
    beam_search: BeamSearch | None = None
    # vLLM's extensions: truncation, reasoning effort and display, token ids
    extras: Extras = msgspec.field(default_factory=Extras)


# --------------------------------------------------------------------------- decoding


_HUGE_NUMBER = re.compile(rb"[0-9][eE]\+?[0-9]{3}|[0-9]{300}")


def check_numbers(body: bytes) -> None:
    """A number too large for a float is invalid JSON (as serde_json, in Rust, says; msgspec
    refuses it too, but as a validation error)."""
    if _HUGE_NUMBER.search(body) is None:
        return
    try:
        msgspec.json.decode(body)
    except msgspec.ValidationError:
        raise bad_request("invalid JSON in the request body: number out of range") from None
    except (msgspec.DecodeError, UnicodeDecodeError):
        return  # the caller's own decode reports it


def decode_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 (empty, not JSON, a number out of range, not an
    object): the Responses, Messages and tokenizer routes' first check."""
    if not body.strip():
        raise bad_request("the request body is empty; expected a JSON object")
    check_numbers(body)
    try:
        value = msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise bad_request(f"invalid JSON in the request body: {exc}") from None
    if not isinstance(value, dict):
        raise bad_request("the request body must be a JSON object")
    return value


def decode(body: bytes, chat: bool) -> Any:
    """The body as a ChatCompletionRequest (chat) or CompletionRequest, or a 400."""
    if not body.strip():
        raise bad_request("the request body is empty; expected a JSON object")
    check_numbers(body)
    decoder = _CHAT_DECODER if chat else _COMPLETION_DECODER
    try:
        request = decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise _slow_path_error(body, chat, str(exc)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        raise bad_request(f"invalid JSON in the request body: {exc}") from None
    for name in _POLICY_FIELDS[chat]:
        value = getattr(request, name)
        if value is not None:
            _check_refusal(chat, name, value)
    return request


def out_of_range(value: Any, low: int, high: int) -> bool:
    """Whether ``value`` is a number, an integer or a float without a fraction, outside
    [low, high] (a float with a fraction is no integer at all: a type error)."""
    if type(value) is float and not value.is_integer():
        return False
    return type(value) in (int, float) and not low <= value <= high


def range_error(path: str, value: Any) -> APIError | None:
    """The 400 of an integer field (``_INT_FIELDS``: i64; an entry of ``stop_token_ids`` or
    /detokenize's ``tokens``: u32) whose number is outside its range, worded as Rust's;
    None for another path or a value in range."""
    key = path.partition("[")[0]
    if key in _U32_LISTS and path != key:
        bounds, rule = (0, U32_END - 1), U32_RANGE
    elif key in _INT_FIELDS and path == key:
        bounds, rule = I64, I64_RANGE
    else:
        return None
    if not out_of_range(value, *bounds):
        return None
    return bad_request(f"invalid value for `{path}`: {rule}", path)


def value_at(raw: dict[str, Any], path: str) -> Any:
    """The value at ``path`` (``key`` or ``key[i]``) of the body, or None."""
    key, _, index = path.partition("[")
    value = raw.get(key)
    if index:
        if not isinstance(value, list) or not index.rstrip("]").isdigit():
            return None
        i = int(index.rstrip("]"))
        return value[i] if i < len(value) else None
    return value


def _slow_path_error(body: bytes, chat: bool, message: str) -> APIError:
    """The error Rust reports for a body msgspec refused: keys first, then the type."""
    try:
        raw = msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # e.g. bytes after the value
        return bad_request(f"invalid JSON in the request body: {exc}")
    if not isinstance(raw, dict):
        return bad_request("the request body must be a JSON object")
    unknown = []
    for key in sorted(raw):
        if key in _KNOWN[chat]:
            continue
        if key in _POLICY_FIELDS[chat]:
            _check_refusal(chat, key, raw[key])
        else:
            unknown.append(key)
    if len(unknown) == 1:
        return bad_request(f"unknown field `{unknown[0]}`", unknown[0])
    if unknown:
        names = ", ".join(f"`{k}`" for k in unknown)
        return bad_request(f"unknown fields: {names}", unknown[0])
    message, _, at = message.partition(" - at `$")
    path = at.rstrip("`").lstrip(".")
    if message.startswith("Object contains unknown field `"):
        field = message.split("`")[1]
        path = f"{path}.{field}" if path else field  # serde names the field itself
        message = f"unknown field `{field}`"
    if not path:
        return bad_request(message)
    out_of_bounds = range_error(path, value_at(raw, path))
    if out_of_bounds is not None:
        return out_of_bounds
    return bad_request(f"invalid value for `{path}`: {message}", path)


def _check_refusal(chat: bool, key: str, value: Any) -> None:
    if value is None or refusal(chat, key, value):
        return
    if key == "best_of":
        raise bad_request("`best_of` > 1 is not supported", key)
    raise bad_request(f"`{key}` is not supported", key)


def refusal(chat: bool, key: str, value: Any) -> bool:
    """True when ``value`` of the unimplemented field ``key`` asks for nothing."""
    if key == "best_of":
        return type(value) is int and value == 1
    if key == "suffix":
        return value == "" and type(value) is str
    if key == "functions":
        return value == [] and type(value) is list
    if key == "function_call":
        return type(value) is str and value == "none"
    return False  # every other known field: only null asks for nothing


# --------------------------------------------------------------------------- values


def _num(value: float | int) -> str:
    """A number as Rust's Display prints it (``1`` for 1.0)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def _check(field: str, ok: bool, rule: str, value: float | int) -> None:
    if not ok:
        raise bad_request(f"`{field}` {rule}, got {_num(value)}", field)


def validate(request: Any, max_override: tuple[str, int] | None, vocab_size: int) -> Settings:
    """The shared value checks. ``max_override`` is chat's ``max_completion_tokens``;
    completions take ``max_tokens`` 0 with ``echo`` (the prompt's logprobs only)."""
    max_field, max_value = max_override or ("max_tokens", request.max_tokens)
    echo_only = (max_value == 0 and isinstance(request, s.CompletionRequest)
                 and bool(request.echo))
    if max_value is not None and max_value < 1 and not echo_only:
        raise bad_request(f"`{max_field}` must be at least 1, got {max_value}", max_field)
    max_tokens = max_value
    sampling = p.SamplingParams(max_tokens=0)
    if request.temperature is not None:
        _check("temperature", request.temperature >= 0.0, "must be >= 0", request.temperature)
        sampling.temperature = float(request.temperature)
    if request.top_p is not None:
        _check("top_p", 0.0 < request.top_p <= 1.0, "must be in (0, 1]", request.top_p)
        sampling.top_p = float(request.top_p)
    if request.top_k is not None:
        _check("top_k", request.top_k >= -1,
               "must be -1 (disabled), 0 (disabled) or positive", request.top_k)
        sampling.top_k = max(request.top_k, 0)
    if request.min_p is not None:
        _check("min_p", 0.0 <= request.min_p <= 1.0, "must be in [0, 1]", request.min_p)
        sampling.min_p = float(request.min_p)
    for field in ("presence_penalty", "frequency_penalty"):
        value = getattr(request, field)
        if value is not None:
            _check(field, -2.0 <= value <= 2.0, "must be in [-2, 2]", value)
            setattr(sampling, field, float(value))
    if request.repetition_penalty is not None:
        value = request.repetition_penalty
        _check("repetition_penalty", 0.0 < value <= 2.0, "must be in (0, 2]", value)
        sampling.repetition_penalty = float(value)
    if request.min_tokens is not None:
        _check("min_tokens", request.min_tokens >= 0, "must be >= 0", request.min_tokens)
        if max_tokens is not None:
            _check("min_tokens", request.min_tokens <= max_tokens, "must not exceed max_tokens",
                   request.min_tokens)
        sampling.min_tokens = request.min_tokens
    sampling.seed = request.seed
    sampling.ignore_eos = bool(request.ignore_eos)
    if request.stop_token_ids is not None:
        for token in request.stop_token_ids:
            if token >= vocab_size:
                raise bad_request(f"token id {token} in `stop_token_ids` is out of the "
                                  f"vocabulary (size {vocab_size})", "stop_token_ids")
        sampling.stop_token_ids = list(request.stop_token_ids)
    stop = request.stop
    stop = [] if stop is None else [stop] if isinstance(stop, str) else list(stop)
    if any(not item for item in stop):
        raise bad_request("stop strings must not be empty", "stop")
    stream = bool(request.stream)
    include_usage = continuous = False
    options = request.stream_options
    if options is not None:
        if not stream:
            raise bad_request("`stream_options` can only be set when `stream` is true",
                              "stream_options")
        include_usage = bool(options.include_usage)
        continuous = include_usage and bool(options.continuous_usage_stats)
    n = 1 if request.n is None else request.n
    _check("n", 1 <= n <= MAX_N, f"must be in [1, {MAX_N}]", n)
    beam = None
    if request.use_beam_search:
        penalty = request.length_penalty
        beam = BeamSearch(n, 1.0 if penalty is None else float(penalty))
    bad_words = sampling_fields.apply(request, sampling, vocab_size)
    found = structured.constraint(request.response_format, request.structured_outputs,
                                  guided.of(request))
    if found is not None:
        sampling.structured_outputs = found.spec
    skip = request.skip_special_tokens
    return Settings(sampling=sampling, max_tokens=max_tokens, stop=stop,
                    skip_special_tokens=True if skip is None else skip, stream=stream,
                    include_usage=include_usage, model=request.model, n=n,
                    max_tokens_field=max_field, continuous_usage=continuous,
                    bad_words=bad_words, prompt_logprobs=sampling.prompt_logprobs,
                    echo_only=echo_only, constraint=None if found is None else found.name,
                    beam_search=beam)


def chat_logprobs(request: s.ChatCompletionRequest, settings: Settings) -> None:
    """``logprobs`` / ``top_logprobs`` of a chat request into ``settings``."""
    top = request.top_logprobs
    if top is not None:
        _check("top_logprobs", 0 <= top <= MAX_LOGPROBS, f"must be in [0, {MAX_LOGPROBS}]", top)
        if top > 0 and not request.logprobs:
            raise bad_request("`top_logprobs` needs `logprobs` set to true", "top_logprobs")
    if request.logprobs:
        settings.sampling.logprobs = top or 0


def completion_output(request: s.CompletionRequest, settings: Settings) -> None:
    """``logprobs`` and ``echo`` of a completions request into ``settings``: echo with
    logprobs ``k`` asks the engine for the prompt's logprobs too (the larger of ``k`` and
    ``prompt_logprobs``)."""
    k = request.logprobs
    sampling = settings.sampling
    if k is not None:
        _check("logprobs", 0 <= k <= MAX_LOGPROBS, f"must be in [0, {MAX_LOGPROBS}]", k)
        sampling.logprobs = k
    settings.echo = bool(request.echo)
    if settings.echo and k is not None:
        settings.echo_logprobs = k
        sampling.prompt_logprobs = max(k, sampling.prompt_logprobs or 0)


def resolve_max_tokens(requested: int | None, field: str, prompt_len: int,
                       max_model_len: int, what: str) -> int:
    """``max_tokens`` checked against the context, or by default what is left of it;
    ``field`` names where the request set it (``max_tokens`` / ``max_completion_tokens``)."""
    if prompt_len == 0:
        raise bad_request(f"the {what} produced no tokens; the prompt must not be empty", what)
    if prompt_len >= max_model_len:
        raise bad_request(
            f"This model's maximum context length is {max_model_len} tokens. However, your "
            f"request has {prompt_len} input tokens. Please reduce the length of the {what}.",
            what)
    if requested is None:
        return max_model_len - prompt_len
    if prompt_len + requested > max_model_len:
        raise bad_request(
            f"This model's maximum context length is {max_model_len} tokens. However, you "
            f"requested {prompt_len + requested} tokens ({prompt_len} in the {what}, "
            f"{requested} in the completion). Please reduce the length of the {what} or "
            "completion.", field)
    return requested


# --------------------------------------------------------------------------- prompts


def chat_messages(request: s.ChatCompletionRequest, has_template: bool) -> list[dict[str, Any]]:
    """The messages as the template will see them: null fields left out (as transformers'
    apply_chat_template drops them; the fields vLLM drops unread too: ``refusal``,
    ``annotations``, ``audio``, ``function_call``), an assistant message's reasoning as
    ``reasoning`` and ``reasoning_content``, a content list checked to hold text parts only and
    kept as ``{"type": "text", "text": ...}`` parts (the template's content format joins
    them or not: :mod:`server.text.content_format`), an assistant message's tool calls'
    arguments as objects (:mod:`server.validate.tool_calls`; an empty list left out)."""
    if request.messages is None:
        raise bad_request("`messages` is required", "messages")
    if not request.messages:
        raise bad_request("`messages` must not be empty", "messages")
    if not has_template:
        raise bad_request(NO_CHAT_TEMPLATE)
    out = []
    for i, message in enumerate(request.messages):
        item: dict[str, Any] = {"role": message.role}
        content = message.content
        if isinstance(content, list):
            parts = []
            for j, part in enumerate(content):
                param = f"messages[{i}].content[{j}]"
                if part.type != "text":
                    raise bad_request(f"`{param}` is a content part of type `{part.type}`; "
                                      "only text parts (type `text`) are supported", param)
                if part.text is None:
                    raise bad_request(f"`{param}` is a text part without `text`", param)
                parts.append({"type": "text", "text": part.text})
            item["content"] = parts
        elif content is not None:
            item["content"] = content
        for field in ("name", "tool_calls", "tool_call_id"):
            value = getattr(message, field)
            if field == "tool_calls" and value is not None and message.role == "assistant":
                value = template_tool_calls(value, f"messages[{i}].tool_calls") or None
            if value is not None:
                item[field] = value
        reasoning = message_reasoning(message)
        if reasoning is not None:  # under both names, as vLLM gives it
            item["reasoning"] = item["reasoning_content"] = reasoning
        out.append(item)
    return out
