"""The engine's one validated configuration.

The typer app builds it from the user's flags, it travels inside INIT as a msgpack map
(opaque to the frontend) and the engine validates it here. Errors name the field and
the allowed range.
"""

from __future__ import annotations

from typing import Any

import msgspec

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")
SCHEDULING_POLICIES = ("fcfs", "priority")
# vLLM's --runner: what the model is served for (auto: read from the checkpoint).
RUNNERS = ("auto", "generate", "pooling")
# vLLM's --convert: how a pooling model is used (auto: read from the checkpoint; embed:
# sentence embeddings; classify: its classification head; score: a cross-encoder or a
# yes/no reranker's relevance score).
CONVERTS = ("auto", "none", "embed", "classify", "score")
# vLLM's --model-impl: auto (vrs's own decoder where it has the family, else the
# transformers backend), vrs, or transformers.
MODEL_IMPLS = ("auto", "vrs", "transformers")


class ConfigError(ValueError):
    """A configuration value is out of range; the message names the field."""


class MockReply(msgspec.Struct, forbid_unknown_fields=True):
    """One scripted mock answer (tests use it to drive tool calls, reasoning, stops)."""

    when: str
    reply: str
    # Character offsets into ``reply`` where it is encoded in separate parts, so that the
    # streamed pieces break there (e.g. inside a marker the tokenizer keeps whole).
    cuts: list[int] = []


class EngineConfig(msgspec.Struct, forbid_unknown_fields=True):
    model: str
    served_model_name: str | None = None
    mock: bool = False
    device: str = "auto"
    dtype: str = "auto"
    max_model_len: int | None = None  # None: the model's own limit
    block_size: int = 16
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    # vLLM's --scheduling-policy: fcfs, or priority (lower request priority first).
    scheduling_policy: str = "fcfs"
    kv_cache_memory_bytes: int | None = None  # None: a default sized for the device
    gpu_memory_utilization: float = 0.9
    enable_prefix_caching: bool = True
    seed: int = 0
    # True: nothing is compiled (vLLM's --enforce-eager): neither the decoder
    # (engine/runtime/compile.py) nor the FlexAttention kernel (VRS_ATTENTION=flex).
    enforce_eager: bool = False
    # Mock engine knobs (ignored by the real engine).
    mock_step_delay_ms: float = 0.0
    # Scripted answers: a request whose prompt text contains ``when`` gets the tokens of
    # ``reply`` (then EOS) instead of random ones (see engine/mock/replies.py).
    mock_replies: list[MockReply] = []
    # The directory of the frontend's tokenizer (--tokenizer); None: the model directory's.
    # Structured-output grammars are built from it, and mock replies are encoded with it.
    tokenizer: str | None = None
    # Seconds a structured-output grammar may take to compile before the request is
    # refused (--structured-outputs-compile-timeout).
    structured_outputs_compile_timeout: float = 5.0
    log_level: str = "info"
    runner: str = "auto"
    convert: str = "auto"
    model_impl: str = "auto"
    # vLLM's --tensor-parallel-size: processes that each hold a slice of the model
    # (engine/runtime/parallel/); rank 0 is the engine process itself.
    tensor_parallel_size: int = 1

    def validate(self) -> EngineConfig:
        _check(self.device in DEVICES, "device", f"one of {', '.join(DEVICES)}", self.device)
        _check(self.dtype in DTYPES, "dtype", f"one of {', '.join(DTYPES)}", self.dtype)
        if self.max_model_len is not None:
            _check(self.max_model_len >= 1, "max_model_len", ">= 1", self.max_model_len)
        _check(self.block_size in (1, 2, 4, 8, 16, 32, 64, 128), "block_size",
               "a power of two from 1 to 128", self.block_size)
        _check(1 <= self.max_num_seqs <= 65536, "max_num_seqs", "1..65536", self.max_num_seqs)
        _check(self.runner in RUNNERS, "runner", f"one of {', '.join(RUNNERS)}", self.runner)
        _check(self.convert in CONVERTS, "convert", f"one of {', '.join(CONVERTS)}",
               self.convert)
        _check(self.runner != "generate" or self.convert in ("auto", "none"), "convert",
               "auto or none with runner generate (embed, classify and score need a "
               "pooling runner)", self.convert)
        _check(self.model_impl in MODEL_IMPLS, "model_impl",
               f"one of {', '.join(MODEL_IMPLS)}", self.model_impl)
        _check(1 <= self.tensor_parallel_size <= 64, "tensor_parallel_size", "1..64",
               self.tensor_parallel_size)
        _check(self.tensor_parallel_size == 1 or not self.mock, "tensor_parallel_size",
               "1 with --mock (the mock engine has no model to split)",
               self.tensor_parallel_size)
        _check(self.scheduling_policy in SCHEDULING_POLICIES, "scheduling_policy",
               f"one of {', '.join(SCHEDULING_POLICIES)}", self.scheduling_policy)
        _check(self.max_num_batched_tokens >= 1, "max_num_batched_tokens", ">= 1",
               self.max_num_batched_tokens)
        if self.kv_cache_memory_bytes is not None:
            _check(self.kv_cache_memory_bytes > 0, "kv_cache_memory_bytes", "> 0",
                   self.kv_cache_memory_bytes)
        _check(0.0 < self.gpu_memory_utilization <= 1.0, "gpu_memory_utilization",
               "(0, 1]", self.gpu_memory_utilization)
        _check(self.structured_outputs_compile_timeout > 0.0,
               "structured_outputs_compile_timeout", "> 0",
               self.structured_outputs_compile_timeout)
        _check(self.mock_step_delay_ms >= 0.0, "mock_step_delay_ms", ">= 0",
               self.mock_step_delay_ms)
        for reply in self.mock_replies:
            _check(bool(reply.when), "mock_replies", "entries with a non-empty `when`",
                   reply.when)
            _check(reply.cuts == sorted(set(reply.cuts))
                   and all(0 < cut < len(reply.reply) for cut in reply.cuts),
                   "mock_replies", "`cuts`: increasing offsets inside the reply", reply.cuts)
        return self


def _check(ok: bool, field: str, allowed: str, value: Any) -> None:
    if not ok:
        raise ConfigError(f"invalid engine config: {field}={value!r}; allowed: {allowed}")


def config_from_map(data: dict[str, Any]) -> EngineConfig:
    """Build and validate an EngineConfig from INIT's ``engine_config`` map."""
    try:
        config = msgspec.convert(data, EngineConfig)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"invalid engine config: {exc}") from exc
    return config.validate()
