//! `SchedulerStats` and `PrefixCacheStats`: dataclasses, so maps of every field. Missing
//! keys take the dataclass default and unknown keys are skipped, as msgspec decodes them.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::msgpack::{get_bool, get_f64, get_i64, get_map, get_str, opt, Any, At, OrderedMap};
use super::VllmWireError;

/// `PrefixCacheStats` (counts since the previous stats message).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct PrefixCacheStats {
    pub reset: bool,
    pub requests: i64,
    pub queries: i64,
    pub hits: i64,
    pub preempted_requests: i64,
    pub preempted_queries: i64,
    pub preempted_hits: i64,
    pub hits_by_source: Option<Any>,
}

/// `SchedulerStats`: what `/metrics` and `/load` report of an engine.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct SchedulerStats {
    pub num_running_reqs: i64,
    pub num_waiting_reqs: i64,
    pub num_skipped_waiting_reqs: i64,
    pub num_kv_fetch_reqs_by_stage: OrderedMap<String, i64>,
    pub step_counter: i64,
    pub current_wave: i64,
    /// Fraction of KV cache blocks in use, 0..=1.
    pub kv_cache_usage: f64,
    pub iteration_details: Option<Any>,
    pub prefix_cache_stats: PrefixCacheStats,
    pub connector_prefix_cache_stats: Option<PrefixCacheStats>,
    pub kv_cache_eviction_events: Option<Any>,
    pub spec_decoding_stats: Option<Any>,
    pub kv_connector_stats: Option<Any>,
    pub ec_connector_stats: Option<Any>,
    pub waiting_lora_adapters: OrderedMap<String, i64>,
    pub running_lora_adapters: OrderedMap<String, i64>,
    pub cudagraph_stats: Option<Any>,
    pub perf_stats: Option<Any>,
}

fn str_int_map(v: &Value, at: At) -> Result<OrderedMap<String, i64>, VllmWireError> {
    get_map(v, at)?
        .iter()
        .map(|(k, x)| Ok((get_str(k, at)?, get_i64(x, at)?)))
        .collect::<Result<Vec<_>, VllmWireError>>()
        .map(OrderedMap)
}

fn any(v: &Value, _: At) -> Result<Any, VllmWireError> {
    Ok(Any(v.clone()))
}

impl PrefixCacheStats {
    fn from_value(v: &Value, at: At) -> Result<Self, VllmWireError> {
        const N: &str = "PrefixCacheStats";
        let mut s = Self::default();
        for (k, x) in get_map(v, at)? {
            let Some(key) = k.as_str() else { continue };
            match key {
                "reset" => s.reset = get_bool(x, (N, "reset"))?,
                "requests" => s.requests = get_i64(x, (N, "requests"))?,
                "queries" => s.queries = get_i64(x, (N, "queries"))?,
                "hits" => s.hits = get_i64(x, (N, "hits"))?,
                "preempted_requests" => {
                    s.preempted_requests = get_i64(x, (N, "preempted_requests"))?
                }
                "preempted_queries" => s.preempted_queries = get_i64(x, (N, "preempted_queries"))?,
                "preempted_hits" => s.preempted_hits = get_i64(x, (N, "preempted_hits"))?,
                "hits_by_source" => s.hits_by_source = Some(Any(x.clone())),
                _ => {}
            }
        }
        Ok(s)
    }
}

impl SchedulerStats {
    pub(crate) fn from_value(v: &Value) -> Result<Self, VllmWireError> {
        const N: &str = "SchedulerStats";
        let mut s = Self::default();
        for (k, x) in get_map(v, (N, "<map>"))? {
            let Some(key) = k.as_str() else { continue };
            let i = |f| get_i64(x, (N, f));
            let a = |f| opt(x, (N, f), any);
            match key {
                "num_running_reqs" => s.num_running_reqs = i("num_running_reqs")?,
                "num_waiting_reqs" => s.num_waiting_reqs = i("num_waiting_reqs")?,
                "num_skipped_waiting_reqs" => {
                    s.num_skipped_waiting_reqs = i("num_skipped_waiting_reqs")?
                }
                "num_kv_fetch_reqs_by_stage" => {
                    s.num_kv_fetch_reqs_by_stage =
                        str_int_map(x, (N, "num_kv_fetch_reqs_by_stage"))?
                }
                "step_counter" => s.step_counter = i("step_counter")?,
                "current_wave" => s.current_wave = i("current_wave")?,
                "kv_cache_usage" => s.kv_cache_usage = get_f64(x, (N, "kv_cache_usage"))?,
                "iteration_details" => s.iteration_details = a("iteration_details")?,
                "prefix_cache_stats" => {
                    s.prefix_cache_stats =
                        PrefixCacheStats::from_value(x, (N, "prefix_cache_stats"))?
                }
                "connector_prefix_cache_stats" => {
                    s.connector_prefix_cache_stats = opt(
                        x,
                        (N, "connector_prefix_cache_stats"),
                        PrefixCacheStats::from_value,
                    )?
                }
                "kv_cache_eviction_events" => {
                    s.kv_cache_eviction_events = a("kv_cache_eviction_events")?
                }
                "spec_decoding_stats" => s.spec_decoding_stats = a("spec_decoding_stats")?,
                "kv_connector_stats" => s.kv_connector_stats = a("kv_connector_stats")?,
                "ec_connector_stats" => s.ec_connector_stats = a("ec_connector_stats")?,
                "waiting_lora_adapters" => {
                    s.waiting_lora_adapters = str_int_map(x, (N, "waiting_lora_adapters"))?
                }
                "running_lora_adapters" => {
                    s.running_lora_adapters = str_int_map(x, (N, "running_lora_adapters"))?
                }
                "cudagraph_stats" => s.cudagraph_stats = a("cudagraph_stats")?,
                "perf_stats" => s.perf_stats = a("perf_stats")?,
                _ => {}
            }
        }
        Ok(s)
    }
}
