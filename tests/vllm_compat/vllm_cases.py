"""The vLLM engine-core messages the fixtures hold, built with vLLM 0.33.0's own structs.

Each case is the exact multipart message (frames) one side puts on its ZMQ socket, made
the way vLLM's own code makes it (vllm/v1/engine/core_client.py, core.py, utils.py), and
the expected decoded value as JSON (vllm_json.to_json).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import torch
from vllm.sampling_params import (
    RepetitionDetectionParams,
    RequestOutputKind,
    SamplingParams,
    StructuredOutputsParams,
)
from vllm.v1.engine import (
    EngineCoreEvent,
    EngineCoreEventType,
    EngineCoreOutput,
    EngineCoreOutputs,
    EngineCoreRequest,
    EngineCoreRequestType,
    FinishReason,
    UtilityOutput,
)
from vllm.v1.engine.core import EngineCoreProc
from vllm.v1.engine.utils import EngineHandshakeMetadata, EngineZmqAddresses
from vllm.v1.metrics.stats import PrefixCacheStats, SchedulerStats
from vllm.v1.outputs import LogprobsLists, LogprobsTensors
from vllm.v1.serial_utils import MsgpackEncoder, UtilityResult
from vllm_json import to_json

# Fixed, so that fixtures never change between runs.
ARRIVAL = 1_765_000_000.25
STEP_TS = 12_345.5
CALL_ID = 0x1F2E3D4C5B6A7988


@dataclass
class Case:
    name: str
    direction: str  # "frontend" (sent by the frontend) or "engine" (sent by an engine)
    kind: str
    frames: list[bytes]
    expected: Any


def _encode(obj: Any) -> list[bytes]:
    return [bytes(b) for b in MsgpackEncoder().encode(obj)]


def _request(request_id: str, params: SamplingParams, **extra: Any) -> EngineCoreRequest:
    return EngineCoreRequest(
        request_id=request_id,
        prompt_token_ids=[1, 15043, 29892, 3186, 29991],
        mm_features=None,
        sampling_params=params,
        pooling_params=None,
        arrival_time=ARRIVAL,
        lora_request=None,
        **({"cache_salt": None, "data_parallel_rank": None} | extra),
    )


def _add(name: str, req: EngineCoreRequest) -> Case:
    frames = [EngineCoreRequestType.ADD.value, *_encode(req)]
    return Case(name, "frontend", "add", frames, to_json(req))


def _engine_side(params: SamplingParams, eos: int, bad_words: list[list[int]] | None) -> None:
    # What vLLM's InputProcessor adds from the tokenizer before the request is sent.
    params._eos_token_id = eos
    params._all_stop_token_ids.add(eos)
    if bad_words is not None:
        params._bad_words_token_ids = bad_words


def frontend_cases() -> list[Case]:
    cases: list[Case] = []
    basic = SamplingParams(max_tokens=64)
    _engine_side(basic, 2, None)
    cases.append(_add("add_basic", _request("req-basic", basic)))

    full = SamplingParams(
        n=1,
        presence_penalty=0.5,
        frequency_penalty=0.25,
        repetition_penalty=1.125,
        temperature=0.75,
        top_p=0.875,
        top_k=40,
        min_p=0.0625,
        seed=1234,
        stop=["\n\nUser:", "###"],
        stop_token_ids=[7, 9],
        max_tokens=128,
        min_tokens=4,
        logprobs=5,
        prompt_logprobs=3,
        include_stop_str_in_output=True,
        output_kind=RequestOutputKind.DELTA,
        logit_bias={50: 2.5, 7: -100.0},
        allowed_token_ids=[3, 5, 7, 9, 50],
        bad_words=["darn", "heck"],
        skip_special_tokens=False,
    )
    _engine_side(full, 2, [[4418, 29876], [354, 384]])
    cases.append(
        _add(
            "add_full",
            _request(
                "req-full",
                full,
                client_index=1,
                priority=-3,
                external_req_id="chatcmpl-full",
                cache_salt="salt-1",
                data_parallel_rank=0,
                session_id="sess-9",
            ),
        )
    )
    # Extras: an ndarray in the request (4 x 10 int64 = 320 bytes: an aux frame after the
    # message), a small one inline, and the dict/Any fields.
    for label, rows in (("aux", 4), ("inline", 1)):
        scored = SamplingParams(
            max_tokens=1,
            prompt_logprobs=0,
            prompt_logprob_token_ids=np.arange(rows * 10, dtype=np.int64).reshape(rows, 10),
            prompt_logprob_start=1,
            extra_args={"plugin": "x", "weights": [1, 2.5], "nested": {"on": True}},
            repetition_detection=RepetitionDetectionParams(4, 2, 3),
            thinking_token_budget=256,
        )
        _engine_side(scored, 2, None)
        cases.append(
            _add(
                f"add_array_{label}",
                _request(
                    f"req-array-{label}",
                    scored,
                    trace_headers={"traceparent": "00-abc-def-01", "b3": "1"},
                    reasoning_ended=False,
                    reasoning_parser_kwargs={"enable_thinking": False},
                    prompt_is_token_ids=[True, True, False, True, True],
                ),
            )
        )
    structured = {
        "json": StructuredOutputsParams(
            json='{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}'
        ),
        "regex": StructuredOutputsParams(regex="[0-9]{3}-[0-9]{4}"),
        "choice": StructuredOutputsParams(choice=["yes", "no", "maybe"]),
        "grammar": StructuredOutputsParams(grammar='root ::= "a" | "b"'),
        "json_object": StructuredOutputsParams(json_object=True, disable_any_whitespace=True),
    }
    for label, so in structured.items():
        params = SamplingParams(temperature=0.0, max_tokens=32, structured_outputs=so)
        _engine_side(params, 2, None)
        cases.append(_add(f"add_structured_{label}", _request(f"req-so-{label}", params)))

    abort = ["req-basic", "req-full"]
    cases.append(
        Case(
            "abort",
            "frontend",
            "abort",
            [EngineCoreRequestType.ABORT.value, *_encode(abort)],
            abort,
        )
    )
    for name, method, args in (
        ("utility_no_args", "get_supported_tasks", ()),
        ("utility_args", "reset_prefix_cache", (True, 3, "x")),
    ):
        msg = (0, CALL_ID, method, args)
        frames = [EngineCoreRequestType.UTILITY.value, *_encode(msg)]
        cases.append(Case(name, "frontend", "utility", frames, to_json(msg)))

    for name, cfg in (
        ("handshake_init_plain", {}),
        (
            "handshake_init_dp",
            {
                "data_parallel_master_ip": "10.0.0.5",
                "data_parallel_master_port": 29550,
                "_data_parallel_master_port_list": [29551, 29552],
                "_coord_store_port": 29560,
                "data_parallel_size": 2,
            },
        ),
    ):
        addresses = EngineZmqAddresses(
            inputs=["ipc:///tmp/vrs-in-0"],
            outputs=["ipc:///tmp/vrs-out-0"],
            coordinator_input="tcp://10.0.0.5:29600" if cfg else None,
            coordinator_output="tcp://10.0.0.5:29601" if cfg else None,
        )
        meta = EngineHandshakeMetadata(addresses=addresses, parallel_config=cfg)
        cases.append(
            Case(name, "frontend", "handshake_init", [msgspec.msgpack.encode(meta)], to_json(meta))
        )
    return cases


def _lists(rows: int, k: int, base: int) -> LogprobsLists:
    ids = (np.arange(rows * (k + 1), dtype=np.int32) + base).reshape(rows, k + 1)
    lps = -(np.arange(rows * (k + 1), dtype=np.float32) / 8).reshape(rows, k + 1)
    ranks = np.arange(1, rows + 1, dtype=np.int32)
    return LogprobsLists(ids, lps, ranks, None)


def _tensors(rows: int, k: int) -> LogprobsTensors:
    ids = (torch.arange(rows * (k + 1), dtype=torch.int64) + 100).reshape(rows, k + 1)
    lps = -(torch.arange(rows * (k + 1), dtype=torch.float32) / 4).reshape(rows, k + 1)
    ranks = torch.arange(rows, dtype=torch.int64)
    return LogprobsTensors(ids, lps, ranks)


def _outputs(name: str, outs: EngineCoreOutputs) -> Case:
    return Case(name, "engine", "outputs", _encode(outs), to_json(outs))


def engine_cases() -> list[Case]:
    cases: list[Case] = []
    cases.append(
        _outputs(
            "outputs_tokens",
            EngineCoreOutputs(
                engine_index=0,
                outputs=[
                    EngineCoreOutput("req-a", [791]),
                    EngineCoreOutput(
                        "req-b",
                        [11, 12, 13],
                        events=[
                            EngineCoreEvent(EngineCoreEventType.QUEUED, 12_345.0),
                            EngineCoreEvent(EngineCoreEventType.SCHEDULED, 12_345.25),
                        ],
                    ),
                ],
                timestamp=STEP_TS,
            ),
        )
    )
    cases.append(
        _outputs(
            "outputs_finished",
            EngineCoreOutputs(
                engine_index=1,
                outputs=[
                    EngineCoreOutput(
                        "req-stop-str", [13], finish_reason=FinishReason.STOP, stop_reason="###"
                    ),
                    EngineCoreOutput(
                        "req-stop-id", [9], finish_reason=FinishReason.STOP, stop_reason=9
                    ),
                    EngineCoreOutput("req-eos", [2], finish_reason=FinishReason.STOP),
                    EngineCoreOutput("req-length", [77], finish_reason=FinishReason.LENGTH),
                    EngineCoreOutput("req-abort", [], finish_reason=FinishReason.ABORT),
                    EngineCoreOutput(
                        "req-nan", [5], finish_reason=FinishReason.LENGTH, num_nans_in_logits=3
                    ),
                ],
                timestamp=STEP_TS,
                finished_requests={"req-abort"},
            ),
        )
    )
    cases.append(
        _outputs(
            "outputs_logprobs_inline",
            EngineCoreOutputs(
                outputs=[EngineCoreOutput("req-lp", [21], new_logprobs=_lists(1, 2, 21))],
                timestamp=STEP_TS,
            ),
        )
    )
    # 8 x 9 int32/float32 = 288 bytes >= 256: these travel as aux frames.
    cases.append(
        _outputs(
            "outputs_logprobs_aux",
            EngineCoreOutputs(
                outputs=[
                    EngineCoreOutput(
                        "req-lp-big",
                        [30, 31, 32, 33, 34, 35, 36, 37],
                        new_logprobs=_lists(8, 8, 30),
                        new_prompt_logprobs_tensors=_tensors(6, 5),
                    )
                ],
                timestamp=STEP_TS,
            ),
        )
    )
    cases.append(
        _outputs(
            "outputs_extras",
            EngineCoreOutputs(
                outputs=[
                    EngineCoreOutput(
                        "req-x",
                        [4],
                        finish_reason=FinishReason.STOP,
                        stop_reason=None,
                        kv_transfer_params={"do_remote_prefill": False, "remote_port": 5600},
                        trace_headers={"traceparent": "00-abc-def-01"},
                        mm_cache_miss_hashes=["h1"],
                    )
                ],
                timestamp=STEP_TS,
                start_wave=2,
                weight_version="v7",
            ),
        )
    )
    stats = SchedulerStats(
        num_running_reqs=3,
        num_waiting_reqs=2,
        num_skipped_waiting_reqs=1,
        step_counter=17,
        current_wave=0,
        kv_cache_usage=0.375,
        prefix_cache_stats=PrefixCacheStats(requests=4, queries=640, hits=512),
    )
    cases.append(
        _outputs(
            "outputs_scheduler_stats",
            EngineCoreOutputs(outputs=[], scheduler_stats=stats, timestamp=STEP_TS),
        )
    )
    cases.append(
        _outputs(
            "outputs_utility_ok",
            EngineCoreOutputs(
                utility_output=UtilityOutput(CALL_ID, result=UtilityResult(("generate",))),
                timestamp=STEP_TS,
            ),
        )
    )
    cases.append(
        _outputs(
            "outputs_utility_none",
            EngineCoreOutputs(
                utility_output=UtilityOutput(CALL_ID, result=UtilityResult(None)),
                timestamp=STEP_TS,
            ),
        )
    )
    cases.append(
        _outputs(
            "outputs_utility_failed",
            EngineCoreOutputs(
                utility_output=UtilityOutput(
                    CALL_ID, failure_message="Call to reset_prefix_cache method failed: boom"
                ),
                timestamp=STEP_TS,
            ),
        )
    )
    cases.append(
        _outputs(
            "outputs_dp_wave",
            EngineCoreOutputs(engine_index=1, wave_complete=4, timestamp=STEP_TS),
        )
    )
    dead = EngineCoreProc.ENGINE_CORE_DEAD
    cases.append(Case("engine_dead", "engine", "dead", [dead], {"__bytes__": list(dead)}))

    hello = {"status": "HELLO", "local": True, "headless": False}
    ready = {"status": "READY", "local": True, "headless": False}
    ready_dp = {
        "status": "READY",
        "local": False,
        "headless": True,
        "parallel_config_hash": "a1b2c3",
    }
    for name, msg in (
        ("handshake_hello", hello),
        ("handshake_ready", ready),
        ("handshake_ready_dp", ready_dp),
    ):
        cases.append(Case(name, "engine", "handshake", [msgspec.msgpack.encode(msg)], to_json(msg)))
    cases.append(_ready_response())
    return cases


def _ready_response() -> Case:
    from vllm.v1.engine import EngineCoreReadyResponse

    fields = {f.name for f in dataclasses.fields(EngineCoreReadyResponse)}
    values: dict[str, Any] = {
        "max_model_len": 4096,
        "num_gpu_blocks": 2048,
        "block_size": 16,
        "dp_stats_address": None,
        "dtype": "bfloat16",
        "vllm_version": "0.33.0",
        "world_size": 1,
        "data_parallel_size": 1,
        "tensor_parallel_size": 1,
        "pipeline_parallel_size": 1,
        "decode_context_parallel_size": 1,
        "data_parallel_rank": 0,
        "max_num_seqs": 256,
        "max_num_batched_tokens": 8192,
        "instance_id": "inst-0",
        "supports_lora": False,
        "max_loras": 0,
        "kv_cache_size_tokens": 32768,
        "kv_cache_max_concurrency": 8.0,
    }
    resp = EngineCoreReadyResponse(**{k: v for k, v in values.items() if k in fields})
    return Case(
        "engine_ready_response",
        "engine",
        "ready_response",
        [msgspec.msgpack.encode(resp)],
        to_json(resp),
    )
