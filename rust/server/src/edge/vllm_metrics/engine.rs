//! The `vllm:*` series of engine state, read from each engine's latest
//! `SchedulerStats`.

use vrs_wire::SchedulerStats;

use super::float;

type EngineValue = fn(&SchedulerStats) -> String;

/// Engine state from `SchedulerStats`: (name, value); type and help are the contract's.
pub(super) const ENGINE: &[(&str, EngineValue)] = &[
    ("vllm:num_requests_running", |s| s.num_running.to_string()),
    ("vllm:num_requests_waiting", |s| s.num_waiting.to_string()),
    ("vllm:kv_cache_usage_perc", |s| float(s.kv_cache_usage)),
    ("vllm:gpu_cache_usage_perc", |s| float(s.kv_cache_usage)),
    ("vllm:prefix_cache_queries", |s| {
        s.prefix_cache_queries.to_string()
    }),
    ("vllm:prefix_cache_hits", |s| {
        s.prefix_cache_hits.to_string()
    }),
    ("vllm:num_preemptions", |s| s.num_preemptions.to_string()),
];
