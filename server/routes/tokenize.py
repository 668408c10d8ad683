"""``POST /tokenize`` and ``POST /detokenize`` (vLLM's shapes): the body checked (keys, types,
values), a completion-style or chat-style prompt tokenized, or token ids decoded; and
``GET /tokenizer_info``. Rust: rust/server/src/routes/tokenize.rs. Behaviour: docs/api.md,
"/tokenize, /detokenize", "/tokenizer_info".
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from server import openai as s
from server.edge import Receive, Scope, Send, send_json
from server.edge.error import APIError, ErrorKind, bad_request, model_not_found
from server.parsers.tools import check_tools
from server.state import State
from server.validate import params

COMPLETION_KEYS = frozenset({"model", "prompt", "add_special_tokens", "return_token_strs"})
CHAT_KEYS = frozenset({"model", "messages", "add_generation_prompt", "continue_final_message",
                       "add_special_tokens", "chat_template_kwargs", "tools",
                       "return_token_strs"})
DETOKENIZE_KEYS = frozenset({"model", "tokens"})
_encode = msgspec.json.Encoder().encode


class TokenizeCompletion(msgspec.Struct, kw_only=True):
    model: str | None = None
    prompt: str | None = None
    add_special_tokens: bool | None = None
    return_token_strs: bool | None = None


class TokenizeChat(msgspec.Struct, kw_only=True):
    model: str | None = None
    messages: list[s.ChatMessage] | None = None
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    add_special_tokens: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    tools: Any = None
    return_token_strs: bool | None = None


class Detokenize(msgspec.Struct, kw_only=True):
    model: str | None = None
    tokens: list[s.U32] | None = None


def checked_object(body: bytes, keys: frozenset[str] | None) -> dict[str, Any]:
    """The body as a JSON object whose keys are all in ``keys`` (None: not checked)."""
    value = params.decode_object(body)
    if keys is not None:
        unknown = sorted(k for k in value if k not in keys)
        if len(unknown) == 1:
            raise bad_request(f"unknown field `{unknown[0]}`", unknown[0])
        if unknown:
            names = ", ".join(f"`{k}`" for k in unknown)
            raise bad_request(f"unknown fields: {names}", unknown[0])
    return value


_T = TypeVar("_T")


def convert_checked(value: dict[str, Any], kind: type[_T]) -> _T:
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as exc:
        message, _, at = str(exc).partition(" - at `$")
        path = at.rstrip("`").lstrip(".")
        if message.startswith("Object contains unknown field `"):
            field = message.split("`")[1]
            path = f"{path}.{field}" if path else field
            message = f"unknown field `{field}`"
        if not path:
            raise bad_request(message) from None
        out_of_bounds = params.range_error(path, params.value_at(value, path))
        if out_of_bounds is not None:
            raise out_of_bounds from None
        raise bad_request(f"invalid value for `{path}`: {message}", path) from None


def tokenize_request(body: bytes) -> TokenizeCompletion | TokenizeChat:
    raw = checked_object(body, None)
    chat = "messages" in raw
    checked_object(body, CHAT_KEYS if chat else COMPLETION_KEYS)
    if chat:
        return convert_checked(raw, TokenizeChat)
    return convert_checked(raw, TokenizeCompletion)


def chat_input(request: TokenizeChat, has_template: bool) -> dict[str, Any]:
    """Keyword arguments of ``ModelText.chat_prompt`` for a chat-style /tokenize."""
    messages = params.chat_messages(request, has_template)  # type: ignore[arg-type]
    continue_final = bool(request.continue_final_message)
    add_generation = request.add_generation_prompt
    return {
        "messages": messages,
        "tools": check_tools(request.tools),
        "add_generation_prompt": (not continue_final) if add_generation is None
        else add_generation,
        "continue_final_message": continue_final,
        "template_kwargs": request.chat_template_kwargs or {},
    }


def detokenize_request(body: bytes, vocab_size: int) -> Detokenize:
    request = convert_checked(checked_object(body, DETOKENIZE_KEYS), Detokenize)
    if request.tokens is None:
        raise bad_request("`tokens` is required", "tokens")
    for token in request.tokens:
        if token >= vocab_size:
            raise bad_request(f"token id {token} in `tokens` is out of the vocabulary "
                              f"(size {vocab_size})", "tokens")
    return request


def _check_model(state: State, model: str | None) -> None:
    """404 unless ``model`` is the served name; null or "" mean it (vLLM's rule)."""
    if model and model != state.model_name:
        raise model_not_found(model)


async def tokenize(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    body = await state.body(receive)
    request = tokenize_request(body)
    _check_model(state, request.model)
    text_assets = state.text
    if isinstance(request, TokenizeChat):
        kwargs = chat_input(request, text_assets.has_chat_template)
        special = bool(request.add_special_tokens)
        text = await state.prompts.off_loop(text_assets.render_chat, **kwargs)
    else:
        if request.prompt is None:
            raise APIError(ErrorKind.BAD_REQUEST, "`prompt` is required", "prompt")
        special = request.add_special_tokens is not False
        text = request.prompt
    ids = await state.prompts.off_loop(text_assets.encode, text, special)
    strs = None
    if request.return_token_strs:
        backend = text_assets.backend
        strs = [backend.id_to_token(i) or "" for i in ids]
    await send_json(send, 200, _encode(s.Tokenized(len(ids), state.client.max_model_len,
                                                   ids, strs)))


async def tokenizer_info(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    """``GET /tokenizer_info`` (served with --enable-tokenizer-info-endpoint only)."""
    if state.tokenizer_info is None:
        raise APIError(ErrorKind.NOT_FOUND, f"Not Found: {scope['path']}")
    await send_json(send, 200, state.tokenizer_info)


async def detokenize(state: State, scope: Scope, receive: Receive, send: Send) -> None:
    body = await state.body(receive)
    request = detokenize_request(body, state.client.vocab_size)
    _check_model(state, request.model)
    text = await state.prompts.off_loop(state.text.decode, request.tokens or [], False)
    await send_json(send, 200, _encode(s.Detokenized(text)))
