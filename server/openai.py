"""Request and response bodies of the OpenAI routes, as msgspec structs.

The request structs mirror ``rust/server/src/openai.rs`` field for field (same names, same
JSON types: ``int`` fields are i64 there, token ids u32); fields the server knows but
does not implement are typed ``Any`` here and judged by ``params.refusal``. Unknown
fields fail the decode. The response structs serialize to the same JSON as the Rust
ones (key order included).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from server.logprobs import ChatLogprobs, CompletionLogprobs, PromptLogprobs

UnsetType = msgspec.UnsetType
UNSET = msgspec.UNSET

# The integer fields' ranges (Rust's i64 and u32), enforced while decoding, so that a value
# out of range is an error at its place in the body, as in Rust (params.range_error words it).
I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
U32 = Annotated[int, msgspec.Meta(ge=0, le=2**32 - 1)]

# --------------------------------------------------------------------------- requests


class StreamOptions(msgspec.Struct, forbid_unknown_fields=True):
    include_usage: bool | None = None
    continuous_usage_stats: bool | None = None


class ContentPart(msgspec.Struct):
    type: str
    text: str | None = None


class ChatMessage(msgspec.Struct):
    """A chat message; keys it does not name are dropped (vLLM takes and drops them too:
    its test_extra_fields_allowed), so the template never sees them."""

    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[Any] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    # vLLM's name of reasoning_content (it wins when both are set: server/validate/extras.py)
    reasoning: str | None = None
    # What the openai SDK's ChatCompletionMessage carries back; vLLM drops them unread.
    refusal: str | None = None
    annotations: list[Any] | None = None
    audio: dict[str, Any] | None = None
    function_call: dict[str, Any] | None = None


class _Request(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Fields shared by chat and completions (Rust: ``CommonFields``)."""

    model: str | None = None
    max_tokens: I64 | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: I64 | None = None
    min_p: float | None = None
    seed: I64 | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[U32] | None = None
    ignore_eos: bool | None = None
    min_tokens: I64 | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    repetition_penalty: float | None = None
    skip_special_tokens: bool | None = None
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    user: str | None = None
    n: I64 | None = None
    prompt_logprobs: I64 | None = None
    # Checked by server.validate.sampling (raw JSON: the errors name the field, as Rust's).
    logit_bias: Any = None
    allowed_token_ids: Any = None
    bad_words: Any = None
    # Checked by server.validate.structured (raw JSON, as Rust keeps them).
    response_format: Any = None
    structured_outputs: Any = None
    # Beam search (server/validate/beam_search.py checks what may go with it).
    use_beam_search: bool | None = None
    length_penalty: float | None = None
    # Checked by server.validate.engine_fields (raw JSON, as Rust keeps them).
    priority: Any = None
    cache_salt: Any = None
    thinking_token_budget: Any = None
    vllm_xargs: Any = None
    kv_transfer_params: Any = None
    # vLLM's extensions, checked by server.validate.extras.
    return_token_ids: bool | None = None
    return_tokens_as_token_ids: bool | None = None
    truncate_prompt_tokens: I64 | None = None
    truncation_side: str | None = None
    # vLLM's removed guided_* fields, mapped onto structured_outputs by
    # server.validate.guided (raw JSON, as Rust keeps them).
    guided_json: Any = None
    guided_regex: Any = None
    guided_choice: Any = None
    guided_grammar: Any = None
    guided_whitespace_pattern: Any = None
    guided_decoding_backend: Any = None
    # Known, not implemented: accepted only with a value that asks for nothing.
    best_of: Any = None
    service_tier: Any = None
    store: Any = None
    metadata: Any = None
    mm_processor_kwargs: Any = None


class ChatCompletionRequest(_Request, kw_only=True):
    messages: list[ChatMessage] | None = None
    max_completion_tokens: I64 | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool | None = None
    continue_final_message: bool | None = None
    logprobs: bool | None = None
    top_logprobs: I64 | None = None
    # Checked by tools.tool_settings (raw JSON, as Rust keeps them).
    tools: Any = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    echo: bool | None = None
    # vLLM's chat extensions, checked by server.validate.extras.
    reasoning_effort: str | None = None
    include_reasoning: bool | None = None
    separate_reasoning: bool | None = None
    # Known, not implemented (chat only).
    functions: Any = None
    function_call: Any = None
    modalities: Any = None
    audio: Any = None
    prediction: Any = None
    web_search_options: Any = None
    documents: Any = None


class CompletionRequest(_Request, kw_only=True):
    prompt: str | list[Any] | None = None
    logprobs: I64 | None = None
    echo: bool | None = None
    # Known, not implemented (completions only).
    suffix: Any = None


COMMON_FIELDS = frozenset(
    f for f in _Request.__struct_fields__ if f not in
    {"best_of", "service_tier", "store", "metadata", "mm_processor_kwargs"})
CHAT_FIELDS = frozenset({"messages", "max_completion_tokens", "chat_template_kwargs",
                         "add_generation_prompt", "continue_final_message", "logprobs",
                         "top_logprobs", "tools", "tool_choice", "parallel_tool_calls",
                         "echo", "reasoning_effort", "include_reasoning",
                         "separate_reasoning"})
COMPLETION_FIELDS = frozenset({"prompt", "logprobs", "echo"})

# --------------------------------------------------------------------------- responses


class PromptTokensDetails(msgspec.Struct):
    cached_tokens: int = 0


class CompletionTokensDetails(msgspec.Struct):
    reasoning_tokens: int = 0


class Usage(msgspec.Struct):
    """A response's token counts. ``prompt_tokens_details.cached_tokens``: the prompt
    tokens the engine found in its prefix cache (vLLM's shape; always present, 0 for a
    fresh prompt or before the engine's first output). ``completion_tokens_details
    .reasoning_tokens``: a chat answer's reasoning tokens, present only when the server has
    a reasoning parser (``server/output/reasoning_tokens.py``)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails = msgspec.field(
        default_factory=PromptTokensDetails)
    completion_tokens_details: CompletionTokensDetails | UnsetType = UNSET

    @classmethod
    def of(cls, prompt: int, completion: int, cached: int = 0,
           reasoning: int | None = None) -> Usage:
        """``reasoning``: the completion tokens spent reasoning (None: not counted, the
        details are left out)."""
        usage = cls(prompt, completion, prompt + completion, PromptTokensDetails(cached))
        if reasoning is not None:
            usage.completion_tokens_details = CompletionTokensDetails(reasoning)
        return usage

    @property
    def cached_tokens(self) -> int:
        return self.prompt_tokens_details.cached_tokens

    @property
    def reasoning_tokens(self) -> int:
        """Its reasoning tokens (0 when not counted)."""
        details = self.completion_tokens_details
        return 0 if isinstance(details, msgspec.UnsetType) else details.reasoning_tokens


class Function(msgspec.Struct):
    name: str
    arguments: str


class ToolCallOut(msgspec.Struct):
    """A tool call in a response message."""

    id: str
    type: str
    function: Function


class FunctionDelta(msgspec.Struct):
    """A streamed call's function: ``name`` on its first delta only."""

    name: str | UnsetType = UNSET
    arguments: str = ""


class ToolCallDelta(msgspec.Struct, kw_only=True):
    """A tool call piece in a stream delta: the first of a call carries ``id``, ``type``
    and ``function.name``, later ones only ``index`` and an arguments piece (absent fields
    are omitted, never null)."""

    index: int
    id: str | UnsetType = UNSET
    type: str | UnsetType = UNSET
    function: FunctionDelta


class AssistantMessage(msgspec.Struct):
    """``reasoning_content`` is present when the server has a reasoning parser,
    ``tool_calls`` when the answer made any."""

    role: str
    content: str | None
    reasoning_content: str | None | UnsetType = UNSET
    tool_calls: list[ToolCallOut] | UnsetType = UNSET


class ChatChoice(msgspec.Struct):
    index: int
    message: AssistantMessage
    logprobs: ChatLogprobs | None
    finish_reason: str
    token_ids: list[int] | UnsetType = UNSET  # return_token_ids: the generated tokens


class ChatCompletion(msgspec.Struct, kw_only=True):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    prompt_logprobs: PromptLogprobs | UnsetType = UNSET
    prompt_token_ids: list[int] | UnsetType = UNSET  # return_token_ids


class Delta(msgspec.Struct):
    role: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    reasoning_content: str | UnsetType = UNSET
    tool_calls: list[ToolCallDelta] | UnsetType = UNSET


class ChatChunkChoice(msgspec.Struct):
    index: int
    delta: Delta
    logprobs: ChatLogprobs | None
    finish_reason: str | None
    token_ids: list[int] | UnsetType = UNSET  # return_token_ids: the chunk's tokens


class ChatCompletionChunk(msgspec.Struct, kw_only=True):
    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | UnsetType = UNSET
    prompt_logprobs: PromptLogprobs | UnsetType = UNSET
    prompt_token_ids: list[int] | UnsetType = UNSET  # return_token_ids: role chunks


class CompletionChoice(msgspec.Struct):
    """``token_ids``, ``prompt_token_ids``: with return_token_ids (streamed: the chunk's
    tokens, the prompt's on each choice's first chunk)."""

    index: int
    text: str
    logprobs: CompletionLogprobs | None
    finish_reason: str | None
    token_ids: list[int] | UnsetType = UNSET
    prompt_logprobs: PromptLogprobs | UnsetType = UNSET
    prompt_token_ids: list[int] | UnsetType = UNSET


class Completion(msgspec.Struct, kw_only=True):
    """A completions response, and a streamed chunk (without usage, or without choices)."""

    id: str
    object: str = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | UnsetType = UNSET


class ModelCard(msgspec.Struct, kw_only=True):
    id: str
    object: str = "model"
    created: int
    owned_by: str = "vrs"
    root: str
    parent: None = None
    max_model_len: int


class ModelList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[ModelCard]


class Tokenized(msgspec.Struct):
    """``POST /tokenize`` (vLLM's shape)."""

    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None


class Detokenized(msgspec.Struct):
    """``POST /detokenize`` (vLLM's shape)."""

    prompt: str


class Rendered(msgspec.Struct, kw_only=True):
    """A render route's answer: what the engine would receive for the request."""

    request_id: str
    model: str
    prompt: str | None  # the rendered chat / the completion prompt; None for token ids
    prompt_token_ids: list[int]
    sampling_params: dict[str, Any]  # engine.protocol.SamplingParams, field by field
