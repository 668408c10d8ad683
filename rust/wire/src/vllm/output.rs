//! The engine's direction on the output socket: `EngineCoreOutputs` (with its aux frames)
//! or the single-frame engine-dead sentinel.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::array::NdArray;
use super::msgpack::{
    fields, get_f64, get_i64, get_map, get_str, get_u64, list, opt, read_one, str_list, type_err,
    u32_list, Any, At, OrderedMap,
};
use super::stats::SchedulerStats;
use super::VllmWireError;

/// The one frame an engine sends on every output socket as it dies (`ENGINE_CORE_DEAD`).
pub const ENGINE_CORE_DEAD: &[u8] = b"ENGINE_CORE_DEAD";

/// `FinishReason` (an int on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "u8", into = "u8")]
#[allow(missing_docs)]
pub enum FinishReason {
    Stop = 0,
    Length = 1,
    Abort = 2,
    Error = 3,
    Repetition = 4,
}

impl FinishReason {
    /// The OpenAI-facing name (`FINISH_REASON_STRINGS`).
    pub fn as_str(self) -> &'static str {
        ["stop", "length", "abort", "error", "repetition"][self as usize]
    }
}

impl From<FinishReason> for u8 {
    fn from(r: FinishReason) -> u8 {
        r as u8
    }
}

impl TryFrom<u8> for FinishReason {
    type Error = String;
    fn try_from(n: u8) -> Result<Self, String> {
        Ok(match n {
            0 => Self::Stop,
            1 => Self::Length,
            2 => Self::Abort,
            3 => Self::Error,
            4 => Self::Repetition,
            _ => return Err(format!("unknown finish reason {n}")),
        })
    }
}

/// `stop_reason`: the stop string or stop token id that ended the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
#[allow(missing_docs)]
pub enum StopReason {
    Token(i64),
    Text(String),
}

/// `EngineCoreEvent` (a msgspec struct written as a map): `type` is 1 queued,
/// 2 scheduled, 3 preempted; `timestamp` is the engine's monotonic clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct EngineCoreEvent {
    #[serde(rename = "type")]
    pub kind: i64,
    pub timestamp: f64,
}

/// `LogprobsLists` (numpy arrays): `[positions, k+1]` token ids and logprobs, `[positions]`
/// sampled-token ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct LogprobsLists {
    pub logprob_token_ids: NdArray,
    pub logprobs: NdArray,
    pub sampled_token_ranks: NdArray,
    pub cu_num_generated_tokens: Option<Vec<i64>>,
}

/// `LogprobsTensors` (torch tensors), used for prompt logprobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct LogprobsTensors {
    pub logprob_token_ids: NdArray,
    pub logprobs: NdArray,
    pub selected_token_ranks: NdArray,
    pub cu_num_generated_tokens: Option<Vec<i64>>,
    pub cu_num_generated_tokens_tensor: Option<NdArray>,
}

/// vLLM's `EngineCoreOutput`, field for field. Fields typed `Any` are kept as msgpack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct EngineCoreOutput {
    pub request_id: String,
    pub new_token_ids: Vec<u32>,
    pub new_logprobs: Option<LogprobsLists>,
    pub new_prompt_logprobs_tensors: Option<LogprobsTensors>,
    pub pooling_output: Option<NdArray>,
    pub finish_reason: Option<FinishReason>,
    pub stop_reason: Option<StopReason>,
    pub events: Option<Vec<EngineCoreEvent>>,
    pub kv_transfer_params: Option<Any>,
    pub ec_transfer_params: Option<Any>,
    pub trace_headers: Option<OrderedMap<String, String>>,
    pub prefill_stats: Option<Any>,
    pub routed_experts: Option<NdArray>,
    pub num_nans_in_logits: i64,
    pub mm_cache_miss_hashes: Option<Vec<String>>,
    pub new_sampling_mask: Option<Any>,
    pub spec_decode_metrics: Option<Any>,
    pub prompt_token_id_logprobs: Option<NdArray>,
    pub error: Option<Any>,
}

/// `UtilityResult`: `[type info, value]` (type info is nil unless vLLM runs with
/// `VLLM_ALLOW_INSECURE_SERIALIZATION`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct UtilityResult {
    pub type_info: Any,
    pub value: Any,
}

/// `UtilityOutput`: the answer to a UTILITY call; `failure_message` set means it failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct UtilityOutput {
    pub call_id: u64,
    pub failure_message: Option<String>,
    pub result: Option<UtilityResult>,
}

/// vLLM's `EngineCoreOutputs`: one engine step's outputs for one frontend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct EngineCoreOutputs {
    pub engine_index: i64,
    pub outputs: Vec<EngineCoreOutput>,
    pub scheduler_stats: Option<SchedulerStats>,
    pub timestamp: f64,
    pub utility_output: Option<UtilityOutput>,
    /// A Python set of request ids (wire order kept).
    pub finished_requests: Option<Vec<String>>,
    pub wave_complete: Option<i64>,
    pub start_wave: Option<i64>,
    pub weight_version: Option<String>,
}

/// What arrives on an output socket.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineMessage {
    /// One step's outputs.
    Outputs(Box<EngineCoreOutputs>),
    /// The engine died; no more messages follow.
    EngineDead,
}

/// Decodes one multipart message from an engine's output socket.
pub fn decode_engine_message<F: AsRef<[u8]>>(frames: &[F]) -> Result<EngineMessage, VllmWireError> {
    let first = frames.first().ok_or(VllmWireError::NoFrames)?.as_ref();
    if frames.len() == 1 && first == ENGINE_CORE_DEAD {
        return Ok(EngineMessage::EngineDead);
    }
    let frames: Vec<&[u8]> = frames.iter().map(AsRef::as_ref).collect();
    let value = read_one(first)?;
    outputs_from(&value, &frames).map(|o| EngineMessage::Outputs(Box::new(o)))
}

fn nth(items: &[Value], i: usize) -> &Value {
    const NIL: &Value = &Value::Nil;
    items.get(i).unwrap_or(NIL)
}

fn any(v: &Value, _: At) -> Result<Any, VllmWireError> {
    Ok(Any(v.clone()))
}

fn outputs_from(v: &Value, frames: &[&[u8]]) -> Result<EngineCoreOutputs, VllmWireError> {
    const N: &str = "EngineCoreOutputs";
    let f = fields(v, N, 9, 0)?;
    let at = |field| (N, field);
    Ok(EngineCoreOutputs {
        engine_index: f
            .first()
            .map_or(Ok(0), |x| get_i64(x, at("engine_index")))?,
        outputs: match f.get(1) {
            None => Vec::new(),
            Some(x) => list(x, at("outputs"), |o, _| output_from(o, frames))?,
        },
        scheduler_stats: opt(nth(f, 2), at("scheduler_stats"), |x, _| {
            SchedulerStats::from_value(x)
        })?,
        timestamp: f.get(3).map_or(Ok(0.0), |x| get_f64(x, at("timestamp")))?,
        utility_output: opt(nth(f, 4), at("utility_output"), utility_from)?,
        finished_requests: opt(nth(f, 5), at("finished_requests"), str_list)?,
        wave_complete: opt(nth(f, 6), at("wave_complete"), get_i64)?,
        start_wave: opt(nth(f, 7), at("start_wave"), get_i64)?,
        weight_version: opt(nth(f, 8), at("weight_version"), get_str)?,
    })
}

fn output_from(v: &Value, frames: &[&[u8]]) -> Result<EngineCoreOutput, VllmWireError> {
    const N: &str = "EngineCoreOutput";
    let f = fields(v, N, 19, 2)?;
    let at = |field| (N, field);
    let arr = |x: &Value, a: At| NdArray::from_value(x, a, frames);
    Ok(EngineCoreOutput {
        request_id: get_str(&f[0], at("request_id"))?,
        new_token_ids: u32_list(&f[1], at("new_token_ids"))?,
        new_logprobs: opt(nth(f, 2), at("new_logprobs"), |x, a| {
            let g = fields_exact(x, a, 4)?;
            Ok(LogprobsLists {
                logprob_token_ids: arr(&g[0], a)?,
                logprobs: arr(&g[1], a)?,
                sampled_token_ranks: arr(&g[2], a)?,
                cu_num_generated_tokens: opt(&g[3], a, |y, b| list(y, b, get_i64))?,
            })
        })?,
        new_prompt_logprobs_tensors: opt(nth(f, 3), at("new_prompt_logprobs_tensors"), |x, a| {
            let g = fields_exact(x, a, 5)?;
            Ok(LogprobsTensors {
                logprob_token_ids: arr(&g[0], a)?,
                logprobs: arr(&g[1], a)?,
                selected_token_ranks: arr(&g[2], a)?,
                cu_num_generated_tokens: opt(&g[3], a, |y, b| list(y, b, get_i64))?,
                cu_num_generated_tokens_tensor: opt(&g[4], a, arr)?,
            })
        })?,
        pooling_output: opt(nth(f, 4), at("pooling_output"), arr)?,
        finish_reason: opt(nth(f, 5), at("finish_reason"), |x, a| {
            let n = get_u64(x, a)?;
            u8::try_from(n)
                .ok()
                .and_then(|b| FinishReason::try_from(b).ok())
                .ok_or_else(|| type_err(a, "finish reason 0..=4", x))
        })?,
        stop_reason: opt(nth(f, 6), at("stop_reason"), |x, a| match x {
            Value::String(_) => get_str(x, a).map(StopReason::Text),
            _ => get_i64(x, a).map(StopReason::Token),
        })?,
        events: opt(nth(f, 7), at("events"), |x, a| list(x, a, event_from))?,
        kv_transfer_params: opt(nth(f, 8), at("kv_transfer_params"), any)?,
        ec_transfer_params: opt(nth(f, 9), at("ec_transfer_params"), any)?,
        trace_headers: opt(nth(f, 10), at("trace_headers"), |x, a| {
            get_map(x, a)?
                .iter()
                .map(|(k, v)| Ok((get_str(k, a)?, get_str(v, a)?)))
                .collect::<Result<Vec<_>, VllmWireError>>()
                .map(OrderedMap)
        })?,
        prefill_stats: opt(nth(f, 11), at("prefill_stats"), any)?,
        routed_experts: opt(nth(f, 12), at("routed_experts"), arr)?,
        num_nans_in_logits: f
            .get(13)
            .map_or(Ok(0), |x| get_i64(x, at("num_nans_in_logits")))?,
        mm_cache_miss_hashes: opt(nth(f, 14), at("mm_cache_miss_hashes"), str_list)?,
        new_sampling_mask: opt(nth(f, 15), at("new_sampling_mask"), any)?,
        spec_decode_metrics: opt(nth(f, 16), at("spec_decode_metrics"), any)?,
        prompt_token_id_logprobs: opt(nth(f, 17), at("prompt_token_id_logprobs"), arr)?,
        error: opt(nth(f, 18), at("error"), any)?,
    })
}

/// A named tuple: exactly `n` items.
fn fields_exact(v: &Value, at: At, n: usize) -> Result<&[Value], VllmWireError> {
    match v {
        Value::Array(items) if items.len() == n => Ok(items),
        _ => Err(type_err(at, "named tuple of its exact field count", v)),
    }
}

fn event_from(v: &Value, at: At) -> Result<EngineCoreEvent, VllmWireError> {
    let mut kind = None;
    let mut timestamp = None;
    for (k, x) in get_map(v, at)? {
        match k.as_str() {
            Some("type") => kind = Some(get_i64(x, ("EngineCoreEvent", "type"))?),
            Some("timestamp") => timestamp = Some(get_f64(x, ("EngineCoreEvent", "timestamp"))?),
            _ => {}
        }
    }
    match (kind, timestamp) {
        (Some(kind), Some(timestamp)) => Ok(EngineCoreEvent { kind, timestamp }),
        _ => Err(VllmWireError::MissingField {
            name: "EngineCoreEvent",
            field: "type/timestamp".into(),
        }),
    }
}

fn utility_from(v: &Value, _: At) -> Result<UtilityOutput, VllmWireError> {
    const N: &str = "UtilityOutput";
    let f = fields(v, N, 3, 1)?;
    Ok(UtilityOutput {
        call_id: get_u64(&f[0], (N, "call_id"))?,
        failure_message: opt(nth(f, 1), (N, "failure_message"), get_str)?,
        result: opt(nth(f, 2), (N, "result"), |x, a| match x {
            Value::Array(pair) if pair.len() == 2 => Ok(UtilityResult {
                type_info: Any(pair[0].clone()),
                value: Any(pair[1].clone()),
            }),
            _ => Err(type_err(a, "[type info, value]", x)),
        })?,
    })
}
