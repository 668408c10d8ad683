//! vLLM's `EngineCoreOutputs` as vrs's [`EngineOutputs`].
//!
//! - finish reasons: stop/length/abort/error as vrs's strings; vLLM's `repetition`
//!   (its repetition detector) as `stop`;
//! - a stop ends the output unseen, as in vLLM's detokenizer: `stop_token_id` is the
//!   stop token vLLM names, else (EOS) the last new token;
//! - logprobs: `LogprobsLists` / `LogprobsTensors` arrays, rows = positions, columns =
//!   [sampled, top-k...], with the sampled token's rank;
//! - `num_cached_tokens` from `prefill_stats`; `queue_time` and `prefill_time` from the
//!   QUEUED / SCHEDULED events and the step's timestamp (the engine's clock);
//!   `decode_time` needs each request's first token: [`VllmWire`](super::VllmWire) sets it;
//! - scheduler stats: running, waiting, KV usage (free/total blocks from the engine's
//!   `num_gpu_blocks`), prefix-cache counters summed from vLLM's per-interval deltas.

use std::collections::HashMap;

use vrs_wire::vllm::{self as v, Any, NdArray};
use vrs_wire::{EngineCoreOutput, EngineOutputs, SchedulerStats, TokenLogprobs, UtilityOutput};

use crate::error::EngineError;

/// One engine's cumulative prefix-cache counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Prompt tokens looked up.
    pub queries: u64,
    /// Of which hits.
    pub hits: u64,
    /// Preempted requests (rescheduled after preemption).
    pub preemptions: u64,
}

/// `EngineCoreEvent` types.
const QUEUED: i64 = 1;
const SCHEDULED: i64 = 2;

/// `outputs` in vrs's terms; `total_blocks` is the engine's KV block count, `totals`
/// each engine's cumulative prefix-cache counters (updated).
pub fn to_vrs(
    outputs: v::EngineCoreOutputs,
    total_blocks: u64,
    totals: &mut HashMap<u32, Totals>,
) -> Result<EngineOutputs, EngineError> {
    let engine_index = u32::try_from(outputs.engine_index).map_err(|_| {
        EngineError::Protocol(format!(
            "vLLM engine index {} out of range",
            outputs.engine_index
        ))
    })?;
    let step = outputs.timestamp;
    let converted = outputs
        .outputs
        .into_iter()
        .map(|o| output(o, step))
        .collect::<Result<Vec<_>, _>>()?;
    let scheduler_stats = outputs.scheduler_stats.map(|s| {
        let t = totals.entry(engine_index).or_default();
        stats(&s, total_blocks, t)
    });
    let utility_output = outputs.utility_output.map(|u| UtilityOutput {
        call_id: u.call_id,
        success: u.failure_message.is_none(),
        result: u.result.map_or(rmpv::Value::Nil, |r| r.value.0),
        error_message: u.failure_message,
    });
    Ok(EngineOutputs {
        engine_index,
        outputs: converted,
        timestamp: unix_now(),
        scheduler_stats,
        utility_output,
    })
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One request's output; `step` is the step's timestamp on the engine's clock.
pub fn output(o: v::EngineCoreOutput, step: f64) -> Result<EngineCoreOutput, EngineError> {
    let at = |what: &str| format!("request {}: {what}", o.request_id);
    let finish = o.finish_reason.map(|r| match r {
        v::FinishReason::Stop | v::FinishReason::Repetition => vrs_wire::FinishReason::Stop,
        v::FinishReason::Length => vrs_wire::FinishReason::Length,
        v::FinishReason::Abort => vrs_wire::FinishReason::Abort,
        v::FinishReason::Error => vrs_wire::FinishReason::Error,
    });
    let stop_token_id = match (o.finish_reason, &o.stop_reason) {
        (Some(v::FinishReason::Stop), Some(v::StopReason::Token(id))) => u32::try_from(*id).ok(),
        (Some(v::FinishReason::Stop), None) => o.new_token_ids.last().copied(),
        _ => None,
    };
    let new_logprobs = o
        .new_logprobs
        .as_ref()
        .map(|l| rows(&l.logprob_token_ids, &l.logprobs, &l.sampled_token_ranks))
        .transpose()
        .map_err(|e| EngineError::Protocol(at(&format!("new_logprobs: {e}"))))?;
    let prompt_logprobs = o
        .new_prompt_logprobs_tensors
        .as_ref()
        .map(|t| rows(&t.logprob_token_ids, &t.logprobs, &t.selected_token_ranks))
        .transpose()
        .map_err(|e| EngineError::Protocol(at(&format!("prompt logprobs: {e}"))))?;
    let event = |kind: i64| {
        o.events
            .iter()
            .flatten()
            .find(|e| e.kind == kind)
            .map(|e| e.timestamp)
    };
    let (queued, scheduled) = (event(QUEUED), event(SCHEDULED));
    let error_message = match (&o.error, finish) {
        (Some(Any(rmpv::Value::String(s))), _) => Some(s.as_str().unwrap_or("").to_owned()),
        (Some(Any(other)), _) => Some(other.to_string()),
        (None, Some(vrs_wire::FinishReason::Error)) => {
            Some("the vLLM engine failed the request (see its log)".to_owned())
        }
        (None, _) => None,
    };
    Ok(EngineCoreOutput {
        num_cached_tokens: cached_tokens(o.prefill_stats.as_ref()),
        queue_time: queued.zip(scheduled).map(|(q, s)| (s - q).max(0.0)),
        prefill_time: scheduled
            .filter(|_| !o.new_token_ids.is_empty())
            .map(|s| (step - s).max(0.0)),
        request_id: o.request_id,
        new_token_ids: o.new_token_ids,
        finish_reason: finish.map(|f| f.as_str().to_owned()),
        stop_token_id,
        new_logprobs,
        error_message,
        prompt_logprobs,
        error_kind: None,
        decode_time: None,
        pooling_output: None,
    })
}

/// `PrefillStats.num_cached_tokens` (a dataclass map), 0 without one.
fn cached_tokens(stats: Option<&Any>) -> u64 {
    let Some(Any(rmpv::Value::Map(entries))) = stats else {
        return 0;
    };
    entries
        .iter()
        .find(|(k, _)| k.as_str() == Some("num_cached_tokens"))
        .and_then(|(_, v)| v.as_u64())
        .unwrap_or(0)
}

/// Per-position logprobs from `[positions, 1 + k]` token ids and logprobs (column 0 the
/// sampled or prompt token, then the top k) and `[positions]` ranks.
pub fn rows(
    ids: &NdArray,
    logprobs: &NdArray,
    ranks: &NdArray,
) -> Result<Vec<TokenLogprobs>, String> {
    let (positions, width) = match ids.shape[..] {
        [p, w] => (p as usize, w as usize),
        _ => return Err(format!("token ids of shape {:?}, expected 2-D", ids.shape)),
    };
    if logprobs.shape != ids.shape || ranks.shape[..] != [positions as u64] || width == 0 {
        return Err(format!(
            "shapes disagree: token ids {:?}, logprobs {:?}, ranks {:?}",
            ids.shape, logprobs.shape, ranks.shape
        ));
    }
    let ids = ids.to_i64().map_err(|e| e.to_string())?;
    let values = logprobs.to_f32().map_err(|e| e.to_string())?;
    let ranks = ranks.to_i64().map_err(|e| e.to_string())?;
    let token = |id: i64| u32::try_from(id).map_err(|_| format!("token id {id} out of range"));
    (0..positions)
        .map(|r| {
            let row = r * width..(r + 1) * width;
            let (ids, values) = (&ids[row.clone()], &values[row]);
            Ok(TokenLogprobs {
                token_id: token(ids[0])?,
                logprob: f64::from(values[0]),
                rank: u32::try_from(ranks[r]).unwrap_or(u32::MAX),
                top_token_ids: ids[1..]
                    .iter()
                    .map(|&i| token(i))
                    .collect::<Result<_, _>>()?,
                top_logprobs: values[1..].iter().map(|&x| f64::from(x)).collect(),
            })
        })
        .collect()
}

/// vLLM's scheduler stats as vrs's; `totals` accumulates the prefix-cache deltas.
pub fn stats(s: &v::SchedulerStats, total_blocks: u64, totals: &mut Totals) -> SchedulerStats {
    let p = &s.prefix_cache_stats;
    if p.reset {
        *totals = Totals::default();
    }
    let add = |n: i64| u64::try_from(n).unwrap_or(0);
    totals.queries += add(p.queries);
    totals.hits += add(p.hits);
    totals.preemptions += add(p.preempted_requests);
    let usage = s.kv_cache_usage.clamp(0.0, 1.0);
    let used = (usage * total_blocks as f64).round() as u64;
    SchedulerStats {
        num_running: add(s.num_running_reqs),
        num_waiting: add(s.num_waiting_reqs),
        kv_cache_usage: usage,
        prefix_cache_queries: totals.queries,
        prefix_cache_hits: totals.hits,
        num_preemptions: totals.preemptions,
        num_free_blocks: total_blocks.saturating_sub(used),
        num_total_blocks: total_blocks,
    }
}
