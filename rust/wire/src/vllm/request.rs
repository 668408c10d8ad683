//! The frontend's direction: ADD (`EngineCoreRequest`), ABORT and UTILITY messages, each a
//! multipart message `[request type byte, msgpack message, aux frames...]`.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::msgpack::{opt_value, u32_values, write, write_into, write_map16, Any, OrderedMap};
use super::sampling::SamplingParams;
use super::VllmWireError;

/// `EngineCoreRequestType`: the first frame of every message on an engine's input socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RequestType {
    /// An `EngineCoreRequest`.
    Add = 0x00,
    /// A list of request ids.
    Abort = 0x01,
    /// Data-parallel coordinator: start a wave.
    StartDpWave = 0x02,
    /// `(client_index, call_id, method_name, args)`.
    Utility = 0x03,
    /// Engine-internal sentinel.
    ExecutorFailed = 0x04,
    /// Engine-internal sentinel.
    Wakeup = 0x05,
}

impl TryFrom<&[u8]> for RequestType {
    type Error = VllmWireError;
    fn try_from(frame: &[u8]) -> Result<Self, VllmWireError> {
        Ok(match frame {
            [0x00] => Self::Add,
            [0x01] => Self::Abort,
            [0x02] => Self::StartDpWave,
            [0x03] => Self::Utility,
            [0x04] => Self::ExecutorFailed,
            [0x05] => Self::Wakeup,
            _ => return Err(VllmWireError::RequestTypeFrame(frame.to_vec())),
        })
    }
}

/// vLLM's `EngineCoreRequest` for text generation, field for field. The fields for images
/// (`mm_features`), pooling, LoRA, prompt embeddings and KV hints are always written as
/// `None`, so they are not fields here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct EngineCoreRequest {
    pub request_id: String,
    pub prompt_token_ids: Option<Vec<u32>>,
    pub sampling_params: Option<SamplingParams>,
    /// Wall-clock seconds (`time.time()`).
    pub arrival_time: f64,
    pub cache_salt: Option<String>,
    pub data_parallel_rank: Option<i64>,
    pub prompt_is_token_ids: Option<Vec<bool>>,
    pub client_index: i64,
    pub current_wave: i64,
    pub priority: i64,
    pub trace_headers: Option<OrderedMap<String, String>>,
    pub resumable: bool,
    pub external_req_id: Option<String>,
    pub reasoning_ended: Option<bool>,
    pub reasoning_parser_kwargs: Option<Any>,
    pub abort_immediately: bool,
    pub session_id: Option<String>,
}

impl EngineCoreRequest {
    /// A request with vLLM's defaults for everything but the id, prompt and params.
    pub fn new(request_id: String, prompt_token_ids: Vec<u32>, params: SamplingParams) -> Self {
        Self {
            request_id,
            prompt_token_ids: Some(prompt_token_ids),
            sampling_params: Some(params),
            arrival_time: 0.0,
            cache_salt: None,
            data_parallel_rank: None,
            prompt_is_token_ids: None,
            client_index: 0,
            current_wave: 0,
            priority: 0,
            trace_headers: None,
            resumable: false,
            external_req_id: None,
            reasoning_ended: None,
            reasoning_parser_kwargs: None,
            abort_immediately: false,
            session_id: None,
        }
    }

    /// Appends the request as vLLM writes it: an array of all 22 fields.
    fn write(&self, out: &mut Vec<u8>, aux: &mut Vec<Vec<u8>>) {
        let s = |x: &Option<String>| opt_value(x, |v| Value::from(v.as_str()));
        // msgspec ignores `omit_defaults` for `array_like` structs: every field is written.
        let items: Vec<Value> = vec![
            self.request_id.as_str().into(),
            opt_value(&self.prompt_token_ids, |v| u32_values(v)),
            Value::Nil, // mm_features
            Value::Nil, // sampling_params: written below (map16 header)
            Value::Nil, // pooling_params
            Value::F64(self.arrival_time),
            Value::Nil, // lora_request
            s(&self.cache_salt),
            opt_value(&self.data_parallel_rank, |&n| n.into()),
            Value::Nil, // prompt_embeds
            opt_value(&self.prompt_is_token_ids, |v| {
                Value::Array(v.iter().map(|&b| b.into()).collect())
            }),
            self.client_index.into(),
            self.current_wave.into(),
            self.priority.into(),
            opt_value(&self.trace_headers, |h| {
                Value::Map(
                    h.0.iter()
                        .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
                        .collect(),
                )
            }),
            self.resumable.into(),
            s(&self.external_req_id),
            opt_value(&self.reasoning_ended, |&b| b.into()),
            opt_value(&self.reasoning_parser_kwargs, |a| a.0.clone()),
            self.abort_immediately.into(),
            s(&self.session_id),
            Value::Nil, // kv_hints
        ];
        out.push(0xdc); // array16: 22 fields
        out.extend_from_slice(&(items.len() as u16).to_be_bytes());
        for (i, item) in items.iter().enumerate() {
            match (i, &self.sampling_params) {
                (3, Some(params)) => write_map16(out, &params.to_entries(aux)),
                _ => write_into(out, item),
            }
        }
    }
}

/// A multipart message for an engine's input socket, frames in send order.
pub type Frames = Vec<Vec<u8>>;

/// ADD: `[b"\x00", request, aux frames...]`, byte for byte as vLLM's `MsgpackEncoder`.
pub fn encode_add(request: &EngineCoreRequest) -> Frames {
    let mut aux = Vec::new();
    let mut main = Vec::with_capacity(256);
    request.write(&mut main, &mut aux);
    let mut frames = Vec::with_capacity(2 + aux.len());
    frames.push(vec![RequestType::Add as u8]);
    frames.push(main);
    frames.extend(aux);
    frames
}

/// ABORT: `[b"\x01", [request ids...]]`.
pub fn encode_abort<S: AsRef<str>>(request_ids: &[S]) -> Frames {
    let ids = Value::Array(request_ids.iter().map(|s| s.as_ref().into()).collect());
    vec![vec![RequestType::Abort as u8], write(&ids)]
}

/// UTILITY: `[b"\x03", [client_index, call_id, method, [args...]]]`. The engine answers
/// with an `EngineCoreOutputs` whose `utility_output.call_id` is `call_id`.
pub fn encode_utility(client_index: i64, call_id: u64, method: &str, args: &[Any]) -> Frames {
    let msg = Value::Array(vec![
        client_index.into(),
        call_id.into(),
        method.into(),
        Value::Array(args.iter().map(|a| a.0.clone()).collect()),
    ]);
    vec![vec![RequestType::Utility as u8], write(&msg)]
}
