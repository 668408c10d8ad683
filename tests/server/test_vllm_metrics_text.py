"""server/edge/vllm_metrics.py: the vllm:* text (mirrors the tests beside
rust/server/src/edge/vllm_metrics.rs)."""

from __future__ import annotations

import pytest

from engine import protocol as p
from server.edge.vllm_metrics import Siblings, VllmMetrics

pytestmark = pytest.mark.unit


def rendered(m: VllmMetrics, stats: dict[int, p.SchedulerStats]) -> list[str]:
    out: list[str] = []
    m.render(out, 'de"mo', 100, stats)
    text = "".join(out)
    assert text.endswith("\n")
    return text.splitlines()


def test_engine_state_comes_from_scheduler_stats() -> None:
    stats = p.SchedulerStats(num_running=2, num_waiting=1, kv_cache_usage=0.25,
                             prefix_cache_queries=8, prefix_cache_hits=3, num_preemptions=4)
    lines = rendered(VllmMetrics(), {1: stats})
    labels = 'model_name="de\\"mo",engine="1"'
    for line in ["# TYPE vllm:num_requests_running gauge",
                 f"vllm:num_requests_running{{{labels}}} 2",
                 f"vllm:num_requests_waiting{{{labels}}} 1",
                 f"vllm:kv_cache_usage_perc{{{labels}}} 0.25",
                 f"vllm:gpu_cache_usage_perc{{{labels}}} 0.25",
                 "# TYPE vllm:prefix_cache_queries counter",
                 f"vllm:prefix_cache_queries_total{{{labels}}} 8",
                 f"vllm:prefix_cache_hits_total{{{labels}}} 3",
                 f"vllm:num_preemptions_total{{{labels}}} 4",
                 f"vllm:generation_tokens_total{{{labels}}} 0",
                 f'vllm:request_success_total{{{labels},finished_reason="abort"}} 0',
                 f"vllm:e2e_request_latency_seconds_count{{{labels}}} 0"]:
        assert line in lines, line


def test_requests_are_counted_per_engine() -> None:
    m = VllmMetrics()
    m.first_token(0, 7, 0.003)
    m.generated(0, 1, None)
    m.generated(0, 2, 0.02)
    m.finished(0, "length", 0.4, 0.02, 7, 3)
    m.max_generation(0, 3)
    m.generated(1, 5, None)
    lines = rendered(m, {})
    labels = 'model_name="de\\"mo",engine="0"'
    for line in [f"vllm:prompt_tokens_total{{{labels}}} 7",
                 f"vllm:generation_tokens_total{{{labels}}} 3",
                 'vllm:generation_tokens_total{model_name="de\\"mo",engine="1"} 5',
                 f'vllm:request_success_total{{{labels},finished_reason="length"}} 1',
                 f'vllm:request_success_total{{{labels},finished_reason="stop"}} 0',
                 "# TYPE vllm:time_to_first_token_seconds histogram",
                 f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.001"}} 0',
                 f'vllm:time_to_first_token_seconds_bucket{{{labels},le="0.005"}} 1',
                 f'vllm:inter_token_latency_seconds_bucket{{{labels},le="0.025"}} 1',
                 f"vllm:inter_token_latency_seconds_sum{{{labels}}} 0.02",
                 f"vllm:e2e_request_latency_seconds_count{{{labels}}} 1",
                 f"vllm:request_decode_time_seconds_count{{{labels}}} 1",
                 f'vllm:request_prompt_tokens_bucket{{{labels},le="10.0"}} 1',
                 f'vllm:request_prompt_tokens_bucket{{{labels},le="100.0"}} 1',
                 f"vllm:request_max_num_generation_tokens_sum{{{labels}}} 3.0"]:
        assert line in lines, line
    # Token-count buckets stop at the context length (100); the rest is +Inf.
    assert f'vllm:request_prompt_tokens_bucket{{{labels},le="200.0"}} 1' not in lines


def test_the_last_sibling_reports_the_most_tokens() -> None:
    siblings = Siblings(3)
    assert siblings.done(4) is None
    assert siblings.done(9) is None
    assert siblings.done(2) == 9


def test_queue_prefill_and_inference_times_come_from_the_engine() -> None:
    """The engine's queue and prefill times, observed when the request finishes; the
    inference time is prefill + decode (vLLM's RUNNING phase). A request the engine never
    timed (aborted while waiting) is not observed in them."""
    m = VllmMetrics()
    m.finished(0, "stop", 1.2, 0.5, 4, 2, queue=0.25, prefill=0.125)
    m.finished(0, "abort", 0.1, None, 4, 0)
    lines = rendered(m, {})
    labels = 'model_name="de\\"mo",engine="0"'
    for name, total in (("queue", 0.25), ("prefill", 0.125), ("inference", 0.625)):
        series = f"vllm:request_{name}_time_seconds"
        assert f"# TYPE {series} histogram" in lines
        assert f"{series}_count{{{labels}}} 1" in lines, name
        assert f"{series}_sum{{{labels}}} {total}" in lines, name
        assert f'{series}_bucket{{{labels},le="1.0"}} 1' in lines, name
        assert f'{series}_bucket{{{labels},le="7680.0"}} 1' in lines, name
    helps = [line for line in lines if line.startswith("# HELP vllm:request_") and "phase" in line]
    assert helps == [  # vLLM's order (vllm/v1/metrics/loggers.py)
        "# HELP vllm:request_queue_time_seconds Histogram of time spent in WAITING phase for "
        "request.",
        "# HELP vllm:request_inference_time_seconds Histogram of time spent in RUNNING phase "
        "for request.",
        "# HELP vllm:request_prefill_time_seconds Histogram of time spent in PREFILL phase for "
        "request.",
        "# HELP vllm:request_decode_time_seconds Histogram of time spent in DECODE phase for "
        "request.",
    ]
