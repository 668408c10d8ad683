"""A pooling route's body (vLLM 0.33's pooling request shapes): the fields each route takes
(an unknown one is a 400), their checks, the runner and task checks, and the prompts, which
are tokenized here off the event loop: ``input`` as a string, a list of strings, token ids
or a list of token-id lists, or chat ``messages`` (one conversation, or a list of them)
rendered with the chat template; then ``truncate_prompt_tokens`` and the context length.
Rust: rust/server/src/routes/pooling/request.rs. Behaviour: docs/api.md, "Pooling routes".
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import msgspec

from engine import protocol as p
from server import openai as s
from server.edge.error import bad_request, model_not_found
from server.routes.tokenize import checked_object, convert_checked
from server.state import State
from server.validate import engine_fields, params
from server.validate.prompt import U32_END

# The fields of every pooling route (vLLM's PoolingBasicRequestMixin, ClassifyRequestMixin).
COMMON = frozenset({"model", "user", "truncate_prompt_tokens", "truncation_side", "priority",
                    "cache_salt", "use_activation"})
# The prompt fields of /v1/embeddings, /pooling and /classify.
INPUT = frozenset({"input", "messages", "add_special_tokens", "add_generation_prompt",
                   "continue_final_message", "chat_template_kwargs"})
# The output fields of /v1/embeddings and /pooling.
ENCODING = frozenset({"encoding_format", "embed_dtype", "endianness", "dimensions"})
# The fields of /score and /rerank besides their texts.
SCORING = COMMON | {"max_tokens_per_query", "max_tokens_per_doc", "instruction",
                    "chat_template_kwargs"}
ENCODINGS = ("float", "base64")
DTYPES = {"float32": "f4", "float16": "f2"}  # embed_dtype: numpy's code
ENDIANNESS = {"native": "<" if sys.byteorder == "little" else ">", "little": "<", "big": ">"}
# Where a generation request is sent instead, for the runner mismatch's 400.
GENERATE_ROUTES = "/v1/chat/completions, /v1/completions, /v1/responses or /v1/messages"


class PoolingRequest(msgspec.Struct, kw_only=True):
    """Every field a pooling route takes; each route checks which it allows."""

    model: str | None = None
    user: str | None = None
    truncate_prompt_tokens: int | None = None
    truncation_side: str | None = None
    priority: int = 0
    cache_salt: str | None = None
    use_activation: bool | None = None
    input: Any = None
    messages: Any = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = False
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    encoding_format: str = "float"
    embed_dtype: str = "float32"
    endianness: str = "native"
    dimensions: int | None = None
    task: str | None = None
    # /score: the two sides, under any of vLLM's names; /rerank: query and documents.
    text_1: Any = None
    text_2: Any = None
    data_1: Any = None
    data_2: Any = None
    queries: Any = None
    documents: Any = None
    items: Any = None
    query: Any = None
    top_n: int = 0
    return_documents: bool = True
    max_tokens_per_query: int = 0
    max_tokens_per_doc: int = 0
    instruction: str | None = None


def parse(state: State, body: bytes, keys: frozenset[str]) -> PoolingRequest:
    """The body as a request of a route that takes ``keys``: JSON object, known fields, their
    types, the model's name, the shared checks."""
    raw = params.decode_object(body)
    if "normalize" in raw:  # vLLM 0.33 refuses it so, and takes use_activation instead
        raise bad_request("Parameter `normalize` was removed; use `use_activation` instead.",
                          "normalize")
    checked_object(body, keys)
    request = convert_checked(raw, PoolingRequest)
    truncate = request.truncate_prompt_tokens
    if truncate is not None and truncate < -1:
        raise bad_request("`truncate_prompt_tokens` must be -1 (the context length) or at "
                          f"least 0, got {truncate}", "truncate_prompt_tokens")
    side = request.truncation_side
    if side not in (None, "left", "right"):
        raise bad_request(f"`truncation_side` must be `left` or `right`, got `{side}`",
                          "truncation_side")
    max_len = state.client.max_model_len
    if truncate is not None and truncate > max_len:
        raise bad_request(f"truncate_prompt_tokens={truncate} cannot be greater than "
                          f"max_model_len = {max_len}. Please request a smaller truncation "
                          "size.", "truncate_prompt_tokens")
    request.priority = engine_fields.priority(request.priority,
                                              state.options.scheduling_policy)
    request.cache_salt = engine_fields.cache_salt(request.cache_salt)
    if request.continue_final_message and request.add_generation_prompt:
        raise bad_request("Cannot set both `continue_final_message` and "
                          "`add_generation_prompt` to True.", "continue_final_message")
    if request.model and request.model != state.model_name:
        raise model_not_found(request.model)
    return request


def check_encoding(request: PoolingRequest) -> str:
    """The numpy dtype of a base64 answer (``encoding_format``, ``embed_dtype``,
    ``endianness`` checked)."""
    fmt = request.encoding_format
    if fmt not in ENCODINGS:
        raise bad_request(f"`encoding_format` must be `float` or `base64`, got `{fmt}`",
                          "encoding_format")
    dtype = DTYPES.get(request.embed_dtype)
    if dtype is None:
        raise bad_request(f"`embed_dtype` must be one of {', '.join(DTYPES)}, got "
                          f"`{request.embed_dtype}`", "embed_dtype")
    order = ENDIANNESS.get(request.endianness)
    if order is None:
        raise bad_request(f"`endianness` must be one of {', '.join(ENDIANNESS)}, got "
                          f"`{request.endianness}`", "endianness")
    return order + dtype


def runner_error(state: State) -> None:
    """The 400 of a pooling route on a model that generates text."""
    if state.client.runner != p.Runner.POOLING.value:
        raise bad_request("this model generates text: it does not serve pooling requests "
                          f"(embeddings, classify, score, rerank); use {GENERATE_ROUTES}")


def check_task(state: State, task: str, param: str | None = None) -> None:
    """A 400 unless the model serves pooling ``task``."""
    tasks = state.client.pooling_tasks
    if task not in tasks:
        raise bad_request(f"this model does not serve the `{task}` task (it serves: "
                          f"{', '.join(tasks)})", param)


def _token_list(value: Any) -> bool:
    return type(value) is list and all(type(t) is int and 0 <= t < U32_END for t in value)


def _conversation(value: Any) -> bool:
    return (type(value) is list and bool(value)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value))


_SHAPES = ("`input` must be a string, a list of strings, a list of token ids, a list of "
           "lists of token ids, or chat messages")


def _items(request: PoolingRequest) -> list[str | list[int] | list[dict[str, Any]]]:
    """The request's prompts before tokenizing: texts, token ids, or conversations."""
    if request.messages is not None:
        if request.input is not None:
            raise bad_request("send `input` or `messages`, not both", "messages")
        value = request.messages
        if type(value) is list and value and all(_conversation(c) for c in value):
            return list(value)
        if not _conversation(value):
            raise bad_request("`messages` must be a non-empty list of chat messages, or a "
                              "list of such lists", "messages")
        return [value]
    value = request.input
    if value is None:
        raise bad_request("`input` is required", "input")
    if isinstance(value, str):
        return [value]
    if type(value) is not list or not value:
        raise bad_request("`input` must not be empty" if value == [] else _SHAPES, "input")
    if _conversation(value):
        return [value]
    if all(_conversation(c) for c in value):  # a batch of conversations, as in `messages`
        return list(value)
    if all(type(t) is int for t in value) and _token_list(value):
        return [list(value)]
    if all(type(t) is str for t in value) or all(_token_list(t) for t in value):
        return list(value)
    raise bad_request(_SHAPES, "input")


def truncates_left(state: State, request: PoolingRequest) -> bool:
    """Whether truncation keeps the last tokens: the request's ``truncation_side``, else
    the tokenizer's (vLLM's rule, as for generation)."""
    side = request.truncation_side
    return state.prompts.truncate_left if side is None else side == "left"


def truncated(request: PoolingRequest, ids: list[int], max_len: int, left: bool) -> list[int]:
    """``ids`` cut to the request's ``truncate_prompt_tokens`` (-1: the context length):
    the last ones with ``left``, else the first."""
    keep = request.truncate_prompt_tokens
    if keep is None:
        return ids
    keep = max_len if keep == -1 else keep
    if keep >= len(ids):
        return ids
    return ids[len(ids) - keep:] if left else ids[:keep]


def check_length(ids: list[int], max_len: int, index: int, name: str = "input") -> None:
    """A 400 for an empty prompt, or one longer than the context."""
    if not ids:
        raise bad_request(f"`{name}` must not contain an empty prompt (prompt {index} is "
                          "empty)", name)
    if len(ids) > max_len:
        raise bad_request(f"This model's maximum context length is {max_len} tokens. "
                          f"However, prompt {index} of `{name}` has {len(ids)} tokens. "
                          "Please reduce the length of the input.", name)


async def prompts(state: State, request: PoolingRequest) -> list[list[int]]:
    """The request's prompts as token ids, truncated and checked (off the event loop)."""
    items = _items(request)
    limit = state.options.max_batch_prompts
    if len(items) > limit:
        raise bad_request(f"this request has {len(items)} inputs; this server takes at most "
                          f"{limit} in one request (--max-batch-prompts)", "input")
    text = state.text
    vocab = state.client.vocab_size
    chats: dict[int, list[dict[str, Any]]] = {}
    for index, item in enumerate(items):
        if item and isinstance(item, list) and isinstance(item[0], dict):
            conversation = convert_checked({"messages": item}, _Messages).messages
            holder: Any = SimpleNamespace(messages=conversation)
            chats[index] = params.chat_messages(holder, text.has_chat_template)
        elif isinstance(item, list):
            for token in item:
                if isinstance(token, int) and token >= vocab:
                    raise bad_request(f"token id {token} in `input` is out of the vocabulary "
                                      f"(size {vocab})", "input")
    special = request.add_special_tokens
    kwargs = dict(request.chat_template_kwargs or {})

    def tokenize() -> list[list[int]]:
        out = []
        for index, item in enumerate(items):
            if index in chats:
                rendered = text.render_chat(
                    chats[index], add_generation_prompt=request.add_generation_prompt,
                    continue_final_message=request.continue_final_message,
                    template_kwargs=kwargs)
                out.append(text.encode(rendered, bool(special)))
            elif isinstance(item, str):
                out.append(text.encode(item, special is not False))
            else:
                out.append(list(item))  # type: ignore[arg-type]
        return out

    encoded: list[list[int]] = await state.prompts.off_loop(tokenize)
    max_len = state.client.max_model_len
    name = "messages" if request.messages is not None else "input"
    out = []
    for index, ids in enumerate(encoded):
        ids = truncated(request, ids, max_len, truncates_left(state, request))
        check_length(ids, max_len, index, name)
        out.append(ids)
    return out


class _Messages(msgspec.Struct):
    messages: list[s.ChatMessage]
