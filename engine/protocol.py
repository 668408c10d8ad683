"""The frontend <-> engine wire, version 1 (docs/internals.md, "The wire").

Every struct is a msgspec ``array_like`` struct: it travels as a positional msgpack
array. The Rust mirror (crate ``vrs-wire``, ``rust/wire/src/lib.rs``) declares the
same fields in the same order with the same names. Rules:

* append-only: a new field goes at the end and has a default, so an older peer's
  shorter array still decodes;
* floats are float64, integers are plain msgpack ints, optional values are nil;
* compatibility is proved by bytes: ``tests/wire`` makes fixtures by importing this
  module and the Rust test suite decodes and re-encodes each one.

Sockets (the frontend always binds):

* handshake: launcher ROUTER <- engine DEALER (identity = engine index, 2 bytes LE).
  Frames ``[kind_byte, msgpack_body]``: HELLO (engine), INIT (launcher), READY or
  FAILED (engine).
* input: frontend ROUTER <- engine DEALER. The engine's first message is READY
  (``[HandshakeKind.READY, body]``) so the ROUTER learns its identity; after that the
  frontend sends ``[identity, request_type_byte, msgpack_body]``.
* output: frontend PULL <- engine PUSH. Frames ``[msgpack(EngineOutputs)]``; a fatal
  engine error sends the single frame ``ENGINE_DEAD_SENTINEL`` before exiting.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec

PROTOCOL_VERSION = 1

ENGINE_DEAD_SENTINEL = b"VRS_ENGINE_DEAD"


class HandshakeKind(enum.IntEnum):
    """First frame of every handshake message (one byte)."""

    HELLO = 0x10
    INIT = 0x11
    READY = 0x12
    FAILED = 0x13


class RequestType(enum.IntEnum):
    """Type byte of frames sent on the input socket."""

    ADD = 0x00
    ABORT = 0x01
    UTILITY = 0x02


class ErrorKind(enum.StrEnum):
    """``EngineCoreOutput.error_kind``: why a request ended with ``error`` (None: the
    engine failed it)."""

    INVALID_REQUEST = "invalid_request"


class Runner(enum.StrEnum):
    """``Ready.runner``: what the engine's model does."""

    GENERATE = "generate"
    POOLING = "pooling"


class PoolingTask(enum.StrEnum):
    """``PoolingParams.task``: what a pooling request asks of the model."""

    EMBED = "embed"  # one vector per input (CLS, mean or last token, then the ST layers)
    CLASSIFY = "classify"  # the classification head's per-class scores
    SCORE = "score"  # one relevance score of a (query, document) pair (cross-encoder)


class FinishReason(enum.StrEnum):
    STOP = "stop"
    LENGTH = "length"
    ABORT = "abort"
    ERROR = "error"


def engine_identity(engine_index: int) -> bytes:
    """ZMQ routing identity of an engine: its index as 2 bytes little-endian."""
    return engine_index.to_bytes(2, "little")


# --------------------------------------------------------------------------- handshake


class Hello(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    protocol_version: int
    engine_index: int
    pid: int


class Init(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    input_address: str
    output_address: str
    # The engine's configuration as a msgpack map, opaque to the frontend: the typer
    # app builds it, vrs-rs forwards it, ``engine.config.EngineConfig`` validates it.
    engine_config: dict[str, Any]


class RankMemory(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """What one tensor-parallel rank of an engine holds (``Ready.ranks``; ``GET /load``)."""

    rank: int  # the tensor-parallel rank, 0..N-1
    device: str  # e.g. "cpu", "cuda:1"
    weight_bytes: int  # bytes of the model weights this rank holds
    kv_cache_bytes: int  # bytes of its KV cache, every copy the attention backend keeps


class Ready(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    engine_index: int
    max_model_len: int
    vocab_size: int
    block_size: int
    num_kv_blocks: int
    eos_token_ids: list[int]
    model_name: str
    is_mock: bool
    # What the engine serves: "generate" (sampling) or "pooling" (prefill only: embed,
    # classify, score). The frontends refuse the other kind's routes with a 400.
    runner: str = "generate"
    # With runner "pooling": the PoolingTask values it serves, e.g. ["embed"] or
    # ["classify", "score"].
    pooling_tasks: list[str] = []
    # With a classification head: the label of each class, by index (config.json's
    # id2label, else "LABEL_<i>").
    classify_labels: list[str] = []
    # The memory of each of its tensor-parallel ranks, by rank (the mock engine: none).
    ranks: list[RankMemory] = []


class Failed(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    engine_index: int
    message: str


# --------------------------------------------------------------------------- requests


class StructuredOutputs(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A grammar the output must follow (vLLM's ``structured_outputs``), enforced by the
    engine token by token. The frontend sends exactly one of these fields set."""

    json: str | None = None  # a JSON Schema, as compact JSON text
    regex: str | None = None
    choice: list[str] | None = None  # the output is exactly one of these strings
    grammar: str | None = None  # EBNF, in xgrammar's dialect (as vLLM's xgrammar backend)
    json_object: bool = False  # any JSON object (OpenAI's JSON mode)
    structural_tag: str | None = None  # an xgrammar structural tag, as JSON text


class ThinkingBudget(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """vLLM's ``thinking_token_budget``: once a thinking section (opened by a start marker,
    in the prompt or the output, and not yet closed by an end marker) holds ``budget``
    tokens after its start marker, the engine forces the first end marker, token by token
    (engine/thinking_budget.py). The markers are the server's reasoning parser's, each
    tokenized by the frontend (without special tokens)."""

    budget: int
    start_token_ids: list[list[int]]
    end_token_ids: list[list[int]]  # the first one is forced


class SamplingParams(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    max_tokens: int
    min_tokens: int = 0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = disabled
    min_p: float = 0.0
    seed: int | None = None
    stop_token_ids: list[int] = []
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    logprobs: int | None = None  # None = off; k >= 0: sampled token + top-k
    # None = off; k >= 0: each prompt token's logprob (from the 2nd on) + the top k.
    prompt_logprobs: int | None = None
    # (token id, bias) pairs added to the logits before sampling (OpenAI logit_bias).
    logit_bias: list[tuple[int, float]] = []
    # None = any token; else sampling is restricted to these ids (vLLM allowed_token_ids).
    allowed_token_ids: list[int] | None = None
    # Token-id sequences never to generate (vLLM bad_words, tokenized by the frontend):
    # the last id of a sequence is banned where the output ends with the rest of it.
    bad_words_token_ids: list[list[int]] = []
    # None = free text; else the grammar the output must follow (engine/grammar/).
    structured_outputs: StructuredOutputs | None = None
    # None = no budget; else the thinking section's budget and markers (vLLM's
    # thinking_token_budget, Anthropic's thinking.budget_tokens).
    thinking_budget: ThinkingBudget | None = None
    # vLLM's SamplingParams.extra_args: the request's vllm_xargs, and its
    # kv_transfer_params under that key (docs/api.md says what the engine makes of them).
    extra_args: dict[str, Any] | None = None


class PoolingParams(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """A pooling request's task (vLLM's ``PoolingParams``): the engine runs the prompt's
    prefill only and answers one vector, ``EngineCoreOutput.pooling_output``."""

    task: str  # a PoolingTask value
    # embed: keep the first ``dimensions`` values (Matryoshka models only), then normalize.
    dimensions: int | None = None
    # embed: None = the model's own setting (its sentence-transformers Normalize layer;
    # normalized by default); False = the raw pooled vector.
    normalize: bool | None = None
    # classify / score: None or True = the head's activation (softmax over the classes,
    # sigmoid for one class); False = the raw logits.
    use_activation: bool | None = None
    # A (query, document) pair tokenized together: the index of the document's first
    # token, where token_type_ids turn from 0 to 1 (BERT-style cross-encoders).
    token_type_start: int | None = None


class EngineCoreRequest(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """ADD: one request, already tokenized by the frontend: a generation request, or,
    with ``pooling_params``, a pooling one (``sampling_params`` is then not used)."""

    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    arrival_time: float
    # vLLM's priority: lower is served earlier (with --scheduling-policy priority).
    priority: int = 0
    # vLLM's cache_salt: salts the prefix cache's block hashes (requests with different
    # salts never share cached blocks).
    cache_salt: str | None = None
    # None = generate; else a pooling request (the engine must have runner "pooling").
    pooling_params: PoolingParams | None = None


class AbortRequests(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """ABORT: stop these requests now; each ends with finish_reason ``abort``."""

    request_ids: list[str]


class UtilityRequest(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """UTILITY: call a named engine method; the answer comes back as UtilityOutput."""

    call_id: int
    method: str
    args: list[Any] = []


# --------------------------------------------------------------------------- outputs


class TokenLogprobs(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """Log-probabilities of one generated position."""

    token_id: int
    logprob: float
    rank: int  # 1-based rank of the sampled token in the distribution
    top_token_ids: list[int]
    top_logprobs: list[float]


class EngineCoreOutput(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    request_id: str
    new_token_ids: list[int]
    finish_reason: str | None = None  # a FinishReason value
    stop_token_id: int | None = None  # the token that ended it, when it was one
    new_logprobs: list[TokenLogprobs] | None = None
    num_cached_tokens: int = 0
    error_message: str | None = None  # with finish_reason "error"
    # With the request's first output when prompt_logprobs was asked for: one entry per
    # prompt token from the second on (entry i is prompt token i + 1 given tokens 0..i).
    prompt_logprobs: list[TokenLogprobs] | None = None
    # With the request's first output: seconds from the engine receiving the request to
    # its first scheduling (queue), and from then to its first token (prefill).
    queue_time: float | None = None
    prefill_time: float | None = None
    # With finish_reason "error": "invalid_request" when the request itself is at fault
    # (its structured-output spec does not compile, or not within the compile timeout):
    # the frontend answers 400. None: the engine failed it (500).
    error_kind: str | None = None
    # With the request's final output (finish_reason set): seconds from its first token
    # to this output (decode), as the engine measured them; None when it had no token.
    decode_time: float | None = None
    # A pooling request's answer, with its final output (finish_reason "stop", no
    # tokens): the embedding, the class scores, or the one score. float32 values.
    pooling_output: list[float] | None = None


class UtilityOutput(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    call_id: int
    success: bool
    result: Any = None
    error_message: str | None = None


class SchedulerStats(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    num_running: int = 0
    num_waiting: int = 0
    kv_cache_usage: float = 0.0  # fraction of KV blocks in use, 0..1
    prefix_cache_queries: int = 0  # prompt tokens looked up (cumulative)
    prefix_cache_hits: int = 0  # of which found in the cache (cumulative)
    num_preemptions: int = 0  # cumulative
    num_free_blocks: int = 0
    num_total_blocks: int = 0


class EngineOutputs(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    """One message on the output socket: everything one engine step produced."""

    engine_index: int
    outputs: list[EngineCoreOutput]
    timestamp: float
    scheduler_stats: SchedulerStats | None = None
    utility_output: UtilityOutput | None = None


# --------------------------------------------------------------------------- codecs

_encoder = msgspec.msgpack.Encoder()

ENCODER = _encoder
HELLO_DECODER = msgspec.msgpack.Decoder(Hello)
INIT_DECODER = msgspec.msgpack.Decoder(Init)
READY_DECODER = msgspec.msgpack.Decoder(Ready)
FAILED_DECODER = msgspec.msgpack.Decoder(Failed)
ADD_DECODER = msgspec.msgpack.Decoder(EngineCoreRequest)
ABORT_DECODER = msgspec.msgpack.Decoder(AbortRequests)
UTILITY_DECODER = msgspec.msgpack.Decoder(UtilityRequest)
OUTPUTS_DECODER = msgspec.msgpack.Decoder(EngineOutputs)


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)
