//! The `vllm:*` series of engine state, read from each engine's latest
//! `SchedulerStats`.

use vrs_wire::SchedulerStats;

use super::float;

type EngineValue = fn(&SchedulerStats) -> String;

/// Engine state from `SchedulerStats`: (name, type, help, value).
pub(super) const ENGINE: &[(&str, &str, &str, EngineValue)] = &[
    (
        "vllm:num_requests_running",
        "gauge",
        "Number of requests in model execution batches.",
        |s| s.num_running.to_string(),
    ),
    (
        "vllm:num_requests_waiting",
        "gauge",
        "Number of requests waiting to be processed.",
        |s| s.num_waiting.to_string(),
    ),
    (
        "vllm:kv_cache_usage_perc",
        "gauge",
        "KV-cache usage. 1 means 100 percent usage.",
        |s| float(s.kv_cache_usage),
    ),
    (
        "vllm:gpu_cache_usage_perc",
        "gauge",
        "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
        |s| float(s.kv_cache_usage),
    ),
    (
        "vllm:prefix_cache_queries",
        "counter",
        "Prefix cache queries, in terms of number of queried tokens.",
        |s| s.prefix_cache_queries.to_string(),
    ),
    (
        "vllm:prefix_cache_hits",
        "counter",
        "Prefix cache hits, in terms of number of cached tokens.",
        |s| s.prefix_cache_hits.to_string(),
    ),
    (
        "vllm:num_preemptions",
        "counter",
        "Cumulative number of preemption from the engine.",
        |s| s.num_preemptions.to_string(),
    ),
];
