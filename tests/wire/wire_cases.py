"""Wire compatibility cases shared by make_fixtures.py and check_rust_encoded.py.

Each case is a value built with ``engine.protocol`` itself (never a copy of it). The Rust
test ``rust/wire/tests/wire_compat.rs`` builds the same values natively, case by case and
name by name; a field added on one side only makes the bytes differ.

A case with ``raw`` travels as those bytes instead of ``encode(value)``: an older peer's
shorter array, which must decode to ``value`` (the missing tail takes the defaults).
"""

from __future__ import annotations

import dataclasses
import inspect

import msgspec

from engine import protocol as p


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    value: msgspec.Struct
    raw: bytes | None = None
    # True: every field that has a default is given a different value (checked).
    full: bool = False

    @property
    def wire(self) -> bytes:
        return self.raw if self.raw is not None else p.encode(self.value)


def _logprobs() -> list[p.TokenLogprobs]:
    return [
        p.TokenLogprobs(
            token_id=128_000,
            logprob=-0.125,
            rank=1,
            top_token_ids=[128_000, 7, 0],
            top_logprobs=[-0.125, -2.5, -1e-300],
        ),
        p.TokenLogprobs(token_id=3, logprob=-17.75, rank=42, top_token_ids=[], top_logprobs=[]),
    ]


def _rank_memory(rank: int, device: str) -> p.RankMemory:
    """A rank's memory: weights past 4 GiB (a u64 on the wire), KV bytes that differ by rank."""
    return p.RankMemory(rank=rank, device=device, weight_bytes=8_053_063_680 + rank,
                        kv_cache_bytes=2**40 - rank)


def _full_sampling() -> p.SamplingParams:
    return p.SamplingParams(
        max_tokens=4_000_000_000,
        min_tokens=3,
        temperature=0.7,
        top_p=0.95,
        top_k=-1,
        min_p=0.05,
        seed=-(2**63),
        stop_token_ids=[1, 128_001, 65_535, 65_536],
        ignore_eos=True,
        presence_penalty=-0.5,
        frequency_penalty=1.25,
        repetition_penalty=1.1,
        logprobs=5,
        prompt_logprobs=0,
        logit_bias=[(0, -100.0), (128_000, 2.5), (65_536, 100.0)],
        allowed_token_ids=[0, 7, 128_815],
        bad_words_token_ids=[[42], [1, 2, 65_536], []],
        structured_outputs=_full_structured_outputs(),
        thinking_budget=_thinking_budget(),
        extra_args=_extra_args(),
    )


def _full_pooling() -> p.PoolingParams:
    return p.PoolingParams(
        task=p.PoolingTask.SCORE.value,
        dimensions=2**40,
        normalize=False,
        use_activation=False,
        token_type_start=4_000_000_000,
    )


def _thinking_budget() -> p.ThinkingBudget:
    return p.ThinkingBudget(
        budget=4_000_000_000,
        start_token_ids=[[151_667], [8_420, 374, 847, 3_381, 1_882, 25]],
        end_token_ids=[[151_668], []],
    )


def _extra_args() -> dict[str, object]:
    # vLLM's vllm_xargs shapes, and kv_transfer_params (any JSON) under its key.
    return {
        "session_id": "sess-日本",
        "n": -3,
        "big": 2**64 - 1,
        "small": -(2**63),
        "x": 0.5,
        "list": [1, "a", 2.5],
        "kv_transfer_params": {"do_remote_prefill": True, "remote_block_ids": [1, 2],
                               "none": None, "nested": {"k": []}},
    }


def _full_structured_outputs() -> p.StructuredOutputs:
    # Every field set, so the fixture checks each one's position (a frontend sets one).
    return p.StructuredOutputs(
        json='{"type":"object","properties":{"名前":{"type":"string","maxLength":8}}}',
        regex="[a-z]{1,3}\\d+",
        choice=["yes", "no", "日本", ""],
        grammar='root ::= "a" | "b"',
        json_object=True,
        structural_tag='{"type":"structural_tag","format":{"type":"const_string","value":"x"}}',
    )


def _full_output() -> p.EngineCoreOutput:
    return p.EngineCoreOutput(
        request_id="chatcmpl-日本語-🦀",
        new_token_ids=[0, 127, 128, 255, 256, 65_535, 65_536, 4_294_967_295],
        finish_reason=p.FinishReason.STOP.value,
        stop_token_id=128_001,
        new_logprobs=_logprobs(),
        num_cached_tokens=2**40,
        error_message="überlauf ✓",
        prompt_logprobs=_logprobs(),
        queue_time=0.015625,
        prefill_time=1.5e-4,
        error_kind=p.ErrorKind.INVALID_REQUEST.value,
        decode_time=2.75,
        pooling_output=[0.5, -0.125, 3.0e-39, 3.4028234663852886e38, -0.0],
    )


def _full_stats() -> p.SchedulerStats:
    return p.SchedulerStats(
        num_running=64,
        num_waiting=300,
        kv_cache_usage=0.4375,
        prefix_cache_queries=2**33,
        prefix_cache_hits=2**32 + 1,
        num_preemptions=7,
        num_free_blocks=65_536,
        num_total_blocks=70_000,
    )


def _full_utility_output() -> p.UtilityOutput:
    return p.UtilityOutput(
        call_id=2**64 - 1,
        success=True,
        result={"ok": [1, -1, 2**64 - 1, -(2**63)], "π": 6.02214, "none": None, "b": b"\x00\xff"},
        error_message="partial ☃",
    )


def cases() -> list[Case]:
    """All cases, in a stable order. Names are the fixture file stems."""
    return [
        Case("hello", p.Hello(protocol_version=p.PROTOCOL_VERSION, engine_index=3, pid=4_194_304)),
        Case(
            "init",
            p.Init(
                input_address="ipc:///tmp/vrs-x/input.sock",
                output_address="tcp://[::1]:65535",
                engine_config={
                    "mock": True,
                    "max_model_len": 32_768,
                    "seed": -1,
                    "big": 2**64 - 1,
                    "small": -(2**63),
                    "gpu_memory_utilization": 0.9,
                    "model": "/models/Qwen3-0.6B/模型",
                    "dtype": None,
                    "nested": {"list": [1, "two", 3.0, None, False], "empty": {}},
                },
            ),
        ),
        Case(
            "ready",
            p.Ready(
                engine_index=65_535,
                max_model_len=131_072,
                vocab_size=129_280,
                block_size=16,
                num_kv_blocks=2**31,
                eos_token_ids=[1, 128_001],
                model_name="demo-模型",
                is_mock=True,
                runner=p.Runner.POOLING.value,
                pooling_tasks=[p.PoolingTask.CLASSIFY.value, p.PoolingTask.SCORE.value],
                classify_labels=["no", "yes 是"],
                ranks=[_rank_memory(0, "cuda:0"), _rank_memory(1, "cuda:1")],
            ),
            full=True,
        ),
        Case("rank_memory", _rank_memory(3, "cpu")),
        Case(
            "ready_generate_short",
            p.Ready(
                engine_index=0,
                max_model_len=64,
                vocab_size=100,
                block_size=16,
                num_kv_blocks=8,
                eos_token_ids=[2],
                model_name="m",
                is_mock=False,
            ),
            raw=msgspec.msgpack.encode([0, 64, 100, 16, 8, [2], "m", False]),
        ),
        Case(
            # A peer from before Ready.ranks: every other field, no ranks.
            "ready_no_ranks",
            p.Ready(
                engine_index=1,
                max_model_len=64,
                vocab_size=100,
                block_size=16,
                num_kv_blocks=8,
                eos_token_ids=[2],
                model_name="m",
                is_mock=False,
                runner=p.Runner.POOLING.value,
                pooling_tasks=[p.PoolingTask.EMBED.value],
            ),
            raw=msgspec.msgpack.encode([1, 64, 100, 16, 8, [2], "m", False, "pooling",
                                        ["embed"], []]),
        ),
        Case("failed", p.Failed(engine_index=1, message="CUDA out of memory: 显存不足 💥")),
        Case("sampling_params", _full_sampling(), full=True),
        Case("structured_outputs", _full_structured_outputs(), full=True),
        Case("structured_outputs_regex", p.StructuredOutputs(regex="[0-9]+")),
        Case("sampling_params_defaults", p.SamplingParams(max_tokens=16)),
        Case("thinking_budget", _thinking_budget()),
        Case(
            "sampling_params_short",
            p.SamplingParams(max_tokens=8, min_tokens=2, temperature=0.5),
            raw=msgspec.msgpack.encode([8, 2, 0.5]),
        ),
        Case(
            "engine_core_request",
            p.EngineCoreRequest(
                request_id="cmpl-0123456789abcdef",
                prompt_token_ids=[0, 1, 127, 128, 255, 256, 65_535, 65_536, 128_815],
                sampling_params=_full_sampling(),
                arrival_time=1_767_225_600.123456,
                priority=-(2**63),
                cache_salt="salt-🧂-\u0000x",
                pooling_params=_full_pooling(),
            ),
            full=True,
        ),
        Case(
            "engine_core_request_short",
            p.EngineCoreRequest(
                request_id="r",
                prompt_token_ids=[1, 2],
                sampling_params=p.SamplingParams(max_tokens=8),
                arrival_time=0.5,
            ),
            raw=msgspec.msgpack.encode(["r", [1, 2], p.SamplingParams(max_tokens=8), 0.5]),
        ),
        Case("abort_requests", p.AbortRequests(request_ids=["a", "", "長い-id-🚀" * 20])),
        Case("abort_requests_empty", p.AbortRequests(request_ids=[])),
        Case(
            "utility_request",
            p.UtilityRequest(
                call_id=2**63 + 5,
                method="reset_prefix_cache",
                args=[
                    1,
                    -2,
                    2**64 - 1,
                    -(2**63),
                    0.5,
                    float("inf"),
                    "ß",
                    None,
                    True,
                    b"\x01\x02",
                    [1, [2, []]],
                    {"k": {"v": -1.5}},
                ],
            ),
            full=True,
        ),
        Case(
            "utility_request_no_args",
            p.UtilityRequest(call_id=0, method="get_stats"),
            raw=msgspec.msgpack.encode([0, "get_stats"]),
        ),
        Case("token_logprobs", _logprobs()[0]),
        Case("engine_core_output", _full_output(), full=True),
        Case(
            "engine_core_output_running",
            p.EngineCoreOutput(request_id="r", new_token_ids=[42]),
        ),
        Case(
            "engine_core_output_short",
            p.EngineCoreOutput(request_id="r", new_token_ids=[1, 2]),
            raw=msgspec.msgpack.encode(["r", [1, 2]]),
        ),
        Case("utility_output", _full_utility_output(), full=True),
        Case(
            "utility_output_failed",
            p.UtilityOutput(call_id=9, success=False, error_message="no such method"),
        ),
        Case("pooling_params", _full_pooling(), full=True),
        Case("pooling_params_embed", p.PoolingParams(task=p.PoolingTask.EMBED.value,
                                                     dimensions=256)),
        Case("scheduler_stats", _full_stats(), full=True),
        Case("scheduler_stats_defaults", p.SchedulerStats()),
        Case(
            "engine_outputs",
            p.EngineOutputs(
                engine_index=2,
                outputs=[
                    _full_output(),
                    p.EngineCoreOutput(
                        request_id="x",
                        new_token_ids=[],
                        finish_reason=p.FinishReason.ERROR.value,
                        error_message="boom",
                    ),
                    p.EngineCoreOutput(request_id="y", new_token_ids=[5], finish_reason="length"),
                    p.EngineCoreOutput(request_id="z", new_token_ids=[], finish_reason="abort"),
                ],
                timestamp=-0.0,
                scheduler_stats=_full_stats(),
                utility_output=_full_utility_output(),
            ),
            full=True,
        ),
        Case(
            "engine_outputs_minimal",
            p.EngineOutputs(engine_index=0, outputs=[], timestamp=1e-9),
        ),
    ]


def decoder_for(cls: type) -> msgspec.msgpack.Decoder:
    """The decoder engine.protocol defines for ``cls``, or a strict one for a nested struct."""
    for obj in vars(p).values():
        if isinstance(obj, msgspec.msgpack.Decoder) and obj.type is cls:
            return obj
    return msgspec.msgpack.Decoder(cls, strict=True)


def protocol_structs() -> list[type]:
    """Every msgspec struct defined in engine.protocol."""
    return [
        obj
        for obj in vars(p).values()
        if inspect.isclass(obj) and issubclass(obj, msgspec.Struct) and obj.__module__ == p.__name__
    ]


def check_cases(all_cases: list[Case]) -> None:
    """Sanity of the case list itself: unique names, every struct covered, full cases full."""
    names = [c.name for c in all_cases]
    assert len(names) == len(set(names)), "duplicate case names"
    covered = {type(c.value) for c in all_cases}
    missing = [cls.__name__ for cls in protocol_structs() if cls not in covered]
    assert not missing, f"protocol structs without a wire case: {missing}"
    full_types = {type(c.value) for c in all_cases if c.full}
    for c in all_cases:
        if c.full:
            for f in msgspec.structs.fields(c.value):
                if f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT:
                    default = (
                        f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
                    )
                    got = getattr(c.value, f.name)
                    assert got != default, f"{c.name}.{f.name} is at its default {default!r}"
    with_defaults = [
        cls.__name__
        for cls in protocol_structs()
        if any(
            f.default is not msgspec.NODEFAULT or f.default_factory is not msgspec.NODEFAULT
            for f in msgspec.structs.fields(cls)
        )
        and cls not in full_types
    ]
    assert not with_defaults, f"structs with defaults but no full case: {with_defaults}"
