//! The vrs frontend ⇄ engine wire, version 1: a serde mirror of `engine/protocol.py`.
//!
//! Every struct travels as a positional msgpack array (msgspec `array_like=True`): the
//! fields below are declared in the same order, with the same names, as the Python
//! structs. Rules shared with the Python side:
//!
//! * append-only: a new field goes at the end with a default, so an older peer's
//!   shorter array still decodes ([`decode`] fills the defaults);
//! * an array *longer* than the struct is an error (a newer peer's unknown field is
//!   never dropped silently), as is any byte after the message;
//! * floats are float64, integers are plain msgpack ints, `None` is nil.
//!
//! Compatibility is proved by bytes: `tests/wire_compat.rs` decodes and re-encodes
//! fixtures written by `tests/wire/make_fixtures.py` (which imports `engine.protocol`
//! itself) and has Python decode what Rust encodes.

pub mod vllm;

use std::fmt;
use std::str::FromStr;

use serde::de::{DeserializeOwned, Deserializer};
use serde::{Deserialize, Serialize};

/// Version carried in [`Hello::protocol_version`]; both sides must agree.
pub const PROTOCOL_VERSION: u32 = 1;

/// The single frame an engine sends on its output socket before dying of a fatal error.
pub const ENGINE_DEAD_SENTINEL: &[u8] = b"VRS_ENGINE_DEAD";

/// Errors of the wire codec.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A value could not be encoded as msgpack.
    #[error("msgpack encode error: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    /// A message did not decode into the expected type (wrong type, missing required
    /// field, an array longer than the struct, truncated input...).
    #[error("msgpack decode error: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    /// Bytes were left over after one complete message.
    #[error("{0} trailing byte(s) after the msgpack message")]
    TrailingBytes(usize),
    /// A frame's kind/type byte is not one this protocol version knows.
    #[error("unknown {what} byte 0x{byte:02x}")]
    UnknownByte {
        /// Which byte was being interpreted ("handshake kind", "request type").
        what: &'static str,
        /// The offending byte.
        byte: u8,
    },
    /// A string is not a known [`FinishReason`].
    #[error("unknown finish reason {0:?}")]
    UnknownFinishReason(String),
}

/// Encodes a wire struct as msgpack (structs as positional arrays).
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, WireError> {
    Ok(rmp_serde::to_vec(value)?)
}

/// Encodes a wire struct, appending to `buf` (lets a hot path reuse one buffer).
pub fn encode_into<T: Serialize + ?Sized>(value: &T, buf: &mut Vec<u8>) -> Result<(), WireError> {
    Ok(rmp_serde::encode::write(buf, value)?)
}

/// Decodes one complete msgpack message into `T`.
///
/// A shorter array decodes when the missing tail fields have defaults; a longer array,
/// or bytes after the message, is an error.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, WireError> {
    let mut rest = bytes;
    let mut de = rmp_serde::Deserializer::new(&mut rest);
    let value = T::deserialize(&mut de)?;
    drop(de);
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(WireError::TrailingBytes(rest.len()))
    }
}

/// ZMQ routing identity of an engine: its index as 2 bytes little-endian.
pub fn engine_identity(engine_index: u16) -> [u8; 2] {
    engine_index.to_le_bytes()
}

/// First frame of every handshake message (one byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HandshakeKind {
    /// engine → launcher: [`Hello`].
    Hello = 0x10,
    /// launcher → engine: [`Init`].
    Init = 0x11,
    /// engine → launcher (and first message on the input socket): [`Ready`].
    Ready = 0x12,
    /// engine → launcher: [`Failed`].
    Failed = 0x13,
}

impl HandshakeKind {
    /// The byte that travels on the wire.
    pub const fn as_byte(self) -> u8 {
        self as u8
    }
}

impl TryFrom<u8> for HandshakeKind {
    type Error = WireError;
    fn try_from(byte: u8) -> Result<Self, WireError> {
        match byte {
            0x10 => Ok(Self::Hello),
            0x11 => Ok(Self::Init),
            0x12 => Ok(Self::Ready),
            0x13 => Ok(Self::Failed),
            _ => Err(WireError::UnknownByte {
                what: "handshake kind",
                byte,
            }),
        }
    }
}

/// Type byte of frames sent on the input socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RequestType {
    /// [`EngineCoreRequest`].
    Add = 0x00,
    /// [`AbortRequests`].
    Abort = 0x01,
    /// [`UtilityRequest`].
    Utility = 0x02,
}

impl RequestType {
    /// The byte that travels on the wire.
    pub const fn as_byte(self) -> u8 {
        self as u8
    }
}

impl TryFrom<u8> for RequestType {
    type Error = WireError;
    fn try_from(byte: u8) -> Result<Self, WireError> {
        match byte {
            0x00 => Ok(Self::Add),
            0x01 => Ok(Self::Abort),
            0x02 => Ok(Self::Utility),
            _ => Err(WireError::UnknownByte {
                what: "request type",
                byte,
            }),
        }
    }
}

/// Why a request ended; travels as its string value in
/// [`EngineCoreOutput::finish_reason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// EOS, a stop token or a stop string.
    Stop,
    /// `max_tokens` or the model length was reached.
    Length,
    /// Aborted by the frontend.
    Abort,
    /// The engine failed this request (see `error_message`).
    Error,
}

impl FinishReason {
    /// The wire string ("stop", "length", "abort", "error").
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::Abort => "abort",
            Self::Error => "error",
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for FinishReason {
    type Err = WireError;
    fn from_str(s: &str) -> Result<Self, WireError> {
        match s {
            "stop" => Ok(Self::Stop),
            "length" => Ok(Self::Length),
            "abort" => Ok(Self::Abort),
            "error" => Ok(Self::Error),
            other => Err(WireError::UnknownFinishReason(other.to_owned())),
        }
    }
}

/// What an engine's model does; travels as its string value in [`Ready::runner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Runner {
    /// Sampling: the generation routes.
    Generate,
    /// Prefill only: embeddings, classification and scores.
    Pooling,
}

impl Runner {
    /// The wire string ("generate", "pooling").
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Generate => "generate",
            Self::Pooling => "pooling",
        }
    }
}

/// What a pooling request asks of the model; travels as its string value in
/// [`PoolingParams::task`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PoolingTask {
    /// One vector per input.
    Embed,
    /// The classification head's per-class scores.
    Classify,
    /// One relevance score of a (query, document) pair (a cross-encoder).
    Score,
}

impl PoolingTask {
    /// The wire string ("embed", "classify", "score").
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Embed => "embed",
            Self::Classify => "classify",
            Self::Score => "score",
        }
    }

    /// Every task, in wire order.
    pub const ALL: [Self; 3] = [Self::Embed, Self::Classify, Self::Score];

    /// The task of a wire string; `None` for any other string.
    pub fn from_wire(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// Why a request ended with [`FinishReason::Error`]; travels as its string value in
/// [`EngineCoreOutput::error_kind`] (`None` there: the engine failed it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The request itself is at fault (its structured-output spec does not compile, or
    /// not within the compile timeout): the frontend answers 400.
    InvalidRequest,
}

impl ErrorKind {
    /// The wire string ("invalid_request").
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

// ------------------------------------------------------------------------- handshake

/// HELLO (engine → launcher), the engine's first handshake message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Must equal [`PROTOCOL_VERSION`].
    pub protocol_version: u32,
    /// The engine's index (its identity is [`engine_identity`] of it).
    pub engine_index: u32,
    /// The engine's process id.
    pub pid: u32,
}

/// INIT (launcher → engine): where to connect and how to configure itself.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Init {
    /// Address of the frontend's input ROUTER.
    pub input_address: String,
    /// Address of the frontend's output PULL.
    pub output_address: String,
    /// The engine's configuration, opaque to the frontend: a msgpack map with string keys.
    #[serde(deserialize_with = "de_string_keyed_map")]
    pub engine_config: rmpv::Value,
}

/// What one tensor-parallel rank of an engine holds ([`Ready::ranks`]; `GET /load`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankMemory {
    /// The tensor-parallel rank, 0..N-1.
    pub rank: u32,
    /// Its device, e.g. "cpu", "cuda:1".
    pub device: String,
    /// Bytes of the model weights this rank holds.
    pub weight_bytes: u64,
    /// Bytes of its KV cache, every copy the attention backend keeps.
    pub kv_cache_bytes: u64,
}

/// READY (engine → launcher, and first message on the input socket).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ready {
    /// The engine's index.
    pub engine_index: u32,
    /// Longest prompt + output the engine accepts, in tokens.
    pub max_model_len: u64,
    /// The model's vocabulary size.
    pub vocab_size: u64,
    /// Tokens per KV-cache block.
    pub block_size: u64,
    /// KV-cache blocks allocated.
    pub num_kv_blocks: u64,
    /// Token ids that end generation (unless `ignore_eos`).
    pub eos_token_ids: Vec<u32>,
    /// The model's name as the engine knows it.
    pub model_name: String,
    /// True for the mock engine.
    pub is_mock: bool,
    /// What the engine serves: a [`Runner`] string ("generate" or "pooling"). The
    /// frontends refuse the other kind's routes with a 400.
    #[serde(default = "generate_runner")]
    pub runner: String,
    /// With runner "pooling": the [`PoolingTask`] strings it serves.
    #[serde(default)]
    pub pooling_tasks: Vec<String>,
    /// With a classification head: each class's label, by index.
    #[serde(default)]
    pub classify_labels: Vec<String>,
    /// The memory of each of its tensor-parallel ranks, by rank (the mock engine: none).
    #[serde(default)]
    pub ranks: Vec<RankMemory>,
}

fn generate_runner() -> String {
    Runner::Generate.as_str().to_owned()
}

/// FAILED (engine → launcher): the engine could not start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failed {
    /// The engine's index.
    pub engine_index: u32,
    /// What went wrong, for the user.
    pub message: String,
}

// -------------------------------------------------------------------------- requests

fn one() -> f64 {
    1.0
}

fn nil() -> rmpv::Value {
    rmpv::Value::Nil
}

/// A grammar the output must follow (vLLM's `structured_outputs`), enforced by the
/// engine token by token. The frontend sends exactly one of these fields set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructuredOutputs {
    /// A JSON Schema, as compact JSON text.
    #[serde(default)]
    pub json: Option<String>,
    /// A regular expression the whole output matches.
    #[serde(default)]
    pub regex: Option<String>,
    /// The output is exactly one of these strings.
    #[serde(default)]
    pub choice: Option<Vec<String>>,
    /// EBNF, in xgrammar's dialect (as vLLM's xgrammar backend).
    #[serde(default)]
    pub grammar: Option<String>,
    /// Any JSON object (OpenAI's JSON mode).
    #[serde(default)]
    pub json_object: bool,
    /// An xgrammar structural tag, as JSON text.
    #[serde(default)]
    pub structural_tag: Option<String>,
}

/// vLLM's `thinking_token_budget`: once a thinking section (opened by a start marker, in
/// the prompt or the output, and not yet closed by an end marker) holds `budget` tokens
/// after its start marker, the engine forces the first end marker, token by token. The
/// markers are the server's reasoning parser's, each tokenized by the frontend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingBudget {
    /// Tokens a thinking section may hold.
    pub budget: u32,
    /// The start markers' token ids.
    pub start_token_ids: Vec<Vec<u32>>,
    /// The end markers' token ids; the first one is forced.
    pub end_token_ids: Vec<Vec<u32>>,
}

/// Sampling settings of one request; defaults equal the Python struct's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingParams {
    /// Most tokens to generate (required).
    pub max_tokens: u32,
    /// Fewest tokens before EOS / stop tokens may end the request.
    #[serde(default)]
    pub min_tokens: u32,
    /// Softmax temperature; 0 = greedy.
    #[serde(default = "one")]
    pub temperature: f64,
    /// Nucleus sampling mass.
    #[serde(default = "one")]
    pub top_p: f64,
    /// Top-k cut-off; 0 = disabled.
    #[serde(default)]
    pub top_k: i64,
    /// Min-p cut-off.
    #[serde(default)]
    pub min_p: f64,
    /// Per-request seed.
    #[serde(default)]
    pub seed: Option<i64>,
    /// Extra token ids that end the request.
    #[serde(default)]
    pub stop_token_ids: Vec<u32>,
    /// Keep going past EOS.
    #[serde(default)]
    pub ignore_eos: bool,
    /// OpenAI presence penalty.
    #[serde(default)]
    pub presence_penalty: f64,
    /// OpenAI frequency penalty.
    #[serde(default)]
    pub frequency_penalty: f64,
    /// Multiplicative repetition penalty; 1 = off.
    #[serde(default = "one")]
    pub repetition_penalty: f64,
    /// `None` = no logprobs; `k`: the sampled token's logprob plus the top `k`.
    #[serde(default)]
    pub logprobs: Option<u32>,
    /// `None` = off; `k`: each prompt token's logprob (from the second on) plus the top `k`.
    #[serde(default)]
    pub prompt_logprobs: Option<u32>,
    /// (token id, bias) pairs added to the logits before sampling (OpenAI `logit_bias`).
    #[serde(default)]
    pub logit_bias: Vec<(u32, f64)>,
    /// `None` = any token; otherwise sampling is restricted to these ids.
    #[serde(default)]
    pub allowed_token_ids: Option<Vec<u32>>,
    /// Token-id sequences never to generate (vLLM `bad_words`, tokenized by the
    /// frontend): the last id is banned where the output ends with the rest.
    #[serde(default)]
    pub bad_words_token_ids: Vec<Vec<u32>>,
    /// `None` = free text; else the grammar the output must follow.
    #[serde(default)]
    pub structured_outputs: Option<StructuredOutputs>,
    /// `None` = no budget; else the thinking section's budget and markers.
    #[serde(default)]
    pub thinking_budget: Option<ThinkingBudget>,
    /// vLLM's `SamplingParams.extra_args` (`vllm_xargs`, and `kv_transfer_params` under
    /// that key): a msgpack map with string keys, or `None`.
    #[serde(default, deserialize_with = "de_opt_string_keyed_map")]
    pub extra_args: Option<rmpv::Value>,
}

impl SamplingParams {
    /// Parameters with `max_tokens` set and every other field at its default.
    pub fn new(max_tokens: u32) -> Self {
        Self {
            max_tokens,
            min_tokens: 0,
            temperature: 1.0,
            top_p: 1.0,
            top_k: 0,
            min_p: 0.0,
            seed: None,
            stop_token_ids: Vec::new(),
            ignore_eos: false,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repetition_penalty: 1.0,
            logprobs: None,
            prompt_logprobs: None,
            logit_bias: Vec::new(),
            allowed_token_ids: None,
            bad_words_token_ids: Vec::new(),
            structured_outputs: None,
            thinking_budget: None,
            extra_args: None,
        }
    }
}

/// A pooling request's task (vLLM's `PoolingParams`): the engine runs the prompt's
/// prefill only and answers [`EngineCoreOutput::pooling_output`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolingParams {
    /// A [`PoolingTask`] string.
    pub task: String,
    /// embed: keep the first `dimensions` values (Matryoshka models only), then normalize.
    #[serde(default)]
    pub dimensions: Option<u64>,
    /// embed: `None` = the model's own setting; `Some(false)` = the raw pooled vector.
    #[serde(default)]
    pub normalize: Option<bool>,
    /// classify / score: `None` or `Some(true)` = the head's activation; `Some(false)` =
    /// the raw logits.
    #[serde(default)]
    pub use_activation: Option<bool>,
    /// A (query, document) pair tokenized together: the index of the document's first
    /// token, where token type ids turn from 0 to 1.
    #[serde(default)]
    pub token_type_start: Option<u64>,
}

impl PoolingParams {
    /// Parameters for `task` with every other field at its default.
    pub fn new(task: PoolingTask) -> Self {
        Self {
            task: task.as_str().to_owned(),
            dimensions: None,
            normalize: None,
            use_activation: None,
            token_type_start: None,
        }
    }
}

/// ADD: one request, already tokenized by the frontend: a generation request, or, with
/// `pooling_params`, a pooling one (`sampling_params` is then not used).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineCoreRequest {
    /// Unique id chosen by the frontend.
    pub request_id: String,
    /// The prompt's token ids.
    pub prompt_token_ids: Vec<u32>,
    /// How to sample.
    pub sampling_params: SamplingParams,
    /// Unix time (seconds) the frontend received the request.
    pub arrival_time: f64,
    /// vLLM's priority: lower is served earlier (with `--scheduling-policy priority`).
    #[serde(default)]
    pub priority: i64,
    /// vLLM's cache salt: requests with different salts never share cached blocks.
    #[serde(default)]
    pub cache_salt: Option<String>,
    /// `None` = generate; else a pooling request (the engine's runner is "pooling").
    #[serde(default)]
    pub pooling_params: Option<PoolingParams>,
}

/// ABORT: stop these requests now; each ends with finish_reason `abort`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AbortRequests {
    /// Ids of the requests to stop.
    pub request_ids: Vec<String>,
}

/// UTILITY: call a named engine method; the answer comes back as [`UtilityOutput`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilityRequest {
    /// Matches the answer's [`UtilityOutput::call_id`].
    pub call_id: u64,
    /// Name of the engine method.
    pub method: String,
    /// Positional arguments, any msgpack values.
    #[serde(default)]
    pub args: Vec<rmpv::Value>,
}

// --------------------------------------------------------------------------- outputs

/// Log-probabilities of one generated position.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenLogprobs {
    /// The sampled token.
    pub token_id: u32,
    /// Its log-probability.
    pub logprob: f64,
    /// 1-based rank of the sampled token in the distribution.
    pub rank: u32,
    /// The top-k token ids, most likely first.
    pub top_token_ids: Vec<u32>,
    /// Their log-probabilities.
    pub top_logprobs: Vec<f64>,
}

/// What one engine step produced for one request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineCoreOutput {
    /// The request's id.
    pub request_id: String,
    /// Tokens generated this step.
    pub new_token_ids: Vec<u32>,
    /// Set when the request ended: a [`FinishReason`] string.
    #[serde(default)]
    pub finish_reason: Option<String>,
    /// The token that ended it, when it was one.
    #[serde(default)]
    pub stop_token_id: Option<u32>,
    /// One entry per new token, when logprobs were requested.
    #[serde(default)]
    pub new_logprobs: Option<Vec<TokenLogprobs>>,
    /// Prompt tokens served from the prefix cache.
    #[serde(default)]
    pub num_cached_tokens: u64,
    /// With finish_reason "error": what went wrong.
    #[serde(default)]
    pub error_message: Option<String>,
    /// With the request's first output when prompt logprobs were asked for: one entry
    /// per prompt token from the second on (entry `i` is prompt token `i + 1`).
    #[serde(default)]
    pub prompt_logprobs: Option<Vec<TokenLogprobs>>,
    /// With the request's first output: seconds from the engine receiving the request
    /// to its first scheduling.
    #[serde(default)]
    pub queue_time: Option<f64>,
    /// With the request's first output: seconds from its first scheduling to its first
    /// token.
    #[serde(default)]
    pub prefill_time: Option<f64>,
    /// With finish_reason "error": an [`ErrorKind`] string when the request itself is at
    /// fault (the frontend answers 400); `None`: the engine failed it (500).
    #[serde(default)]
    pub error_kind: Option<String>,
    /// With the request's final output: seconds from its first token to this output
    /// (decode), as the engine measured them; `None` when it had no token.
    #[serde(default)]
    pub decode_time: Option<f64>,
    /// A pooling request's answer, with its final output: the embedding, the class
    /// scores, or the one score (float32 values).
    #[serde(default)]
    pub pooling_output: Option<Vec<f64>>,
}

impl EngineCoreOutput {
    /// The finish reason parsed; `Ok(None)` while the request runs, `Err` for a string
    /// this version does not know.
    pub fn finish(&self) -> Result<Option<FinishReason>, WireError> {
        self.finish_reason.as_deref().map(str::parse).transpose()
    }

    /// Whether this output ends the request as [`ErrorKind::InvalidRequest`] (the
    /// request's own fault: a 400).
    pub fn is_invalid_request(&self) -> bool {
        self.finish_reason.as_deref() == Some(FinishReason::Error.as_str())
            && self.error_kind.as_deref() == Some(ErrorKind::InvalidRequest.as_str())
    }
}

/// The answer to a [`UtilityRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilityOutput {
    /// The request's [`UtilityRequest::call_id`].
    pub call_id: u64,
    /// Whether the call succeeded.
    pub success: bool,
    /// The method's return value (nil when none).
    #[serde(default = "nil")]
    pub result: rmpv::Value,
    /// When the call failed: why.
    #[serde(default)]
    pub error_message: Option<String>,
}

/// Scheduler counters reported with engine outputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchedulerStats {
    /// Requests running.
    #[serde(default)]
    pub num_running: u64,
    /// Requests waiting.
    #[serde(default)]
    pub num_waiting: u64,
    /// Fraction of KV blocks in use, 0..1.
    #[serde(default)]
    pub kv_cache_usage: f64,
    /// Prompt tokens looked up in the prefix cache (cumulative).
    #[serde(default)]
    pub prefix_cache_queries: u64,
    /// Of which found in the cache (cumulative).
    #[serde(default)]
    pub prefix_cache_hits: u64,
    /// Preemptions (cumulative).
    #[serde(default)]
    pub num_preemptions: u64,
    /// Free KV blocks.
    #[serde(default)]
    pub num_free_blocks: u64,
    /// All KV blocks.
    #[serde(default)]
    pub num_total_blocks: u64,
}

/// One message on the output socket: everything one engine step produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineOutputs {
    /// The engine that sent it.
    pub engine_index: u32,
    /// Per-request outputs.
    pub outputs: Vec<EngineCoreOutput>,
    /// Unix time (seconds) the step finished.
    pub timestamp: f64,
    /// Scheduler counters, when the engine sent them this step.
    #[serde(default)]
    pub scheduler_stats: Option<SchedulerStats>,
    /// The answer to a utility call, when this message carries one.
    #[serde(default)]
    pub utility_output: Option<UtilityOutput>,
}

/// Decodes a msgpack value and requires a map with string keys (Python `dict[str, Any]`).
fn de_string_keyed_map<'de, D: Deserializer<'de>>(de: D) -> Result<rmpv::Value, D::Error> {
    string_keyed("engine_config", rmpv::Value::deserialize(de)?)
}

fn de_opt_string_keyed_map<'de, D: Deserializer<'de>>(
    de: D,
) -> Result<Option<rmpv::Value>, D::Error> {
    match rmpv::Value::deserialize(de)? {
        rmpv::Value::Nil => Ok(None),
        value => string_keyed("extra_args", value).map(Some),
    }
}

fn string_keyed<E: serde::de::Error>(what: &str, value: rmpv::Value) -> Result<rmpv::Value, E> {
    match &value {
        rmpv::Value::Map(entries) if entries.iter().all(|(k, _)| k.is_str()) => Ok(value),
        rmpv::Value::Map(_) => Err(E::custom(format!("{what}: map keys must be strings"))),
        other => Err(E::custom(format!("{what}: expected a map, got {other}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmpv::Value;

    fn sample_request() -> EngineCoreRequest {
        let mut sp = SamplingParams::new(16);
        sp.seed = Some(-7);
        sp.stop_token_ids = vec![1, 2];
        sp.logprobs = Some(3);
        EngineCoreRequest {
            request_id: "req-1".into(),
            prompt_token_ids: vec![0, 127, 128, 65_535, 65_536],
            sampling_params: sp,
            arrival_time: 1.5,
            priority: 0,
            cache_salt: None,
            pooling_params: None,
        }
    }

    #[test]
    fn round_trip_request() {
        let req = sample_request();
        let bytes = encode(&req).unwrap();
        assert_eq!(bytes[0], 0x97, "a fixarray of 7 fields");
        let back: EngineCoreRequest = decode(&bytes).unwrap();
        assert_eq!(back, req);
    }

    #[test]
    fn short_tail_takes_defaults() {
        // SamplingParams as a 1-element array: only max_tokens.
        let bytes = encode(&(5u32,)).unwrap();
        let sp: SamplingParams = decode(&bytes).unwrap();
        assert_eq!(sp, SamplingParams::new(5));
        // EngineCoreOutput with only the two required fields.
        let bytes = encode(&("r", vec![1u32])).unwrap();
        let out: EngineCoreOutput = decode(&bytes).unwrap();
        assert_eq!(out.finish_reason, None);
        assert_eq!(out.num_cached_tokens, 0);
        let stats: SchedulerStats = decode(&[0x90]).unwrap();
        assert_eq!(stats, SchedulerStats::default());
    }

    #[test]
    fn missing_required_field_is_an_error() {
        let bytes = encode(&(1u32, 2u32)).unwrap();
        assert!(matches!(decode::<Hello>(&bytes), Err(WireError::Decode(_))));
        assert!(decode::<SamplingParams>(&[0x90]).is_err());
    }

    #[test]
    fn extra_trailing_element_is_an_error() {
        let bytes = encode(&(1u32, 2u32, 3u32, 4u32)).unwrap();
        let err = decode::<Hello>(&bytes).unwrap_err();
        assert!(matches!(err, WireError::Decode(_)), "{err}");
        // Also nested: a SamplingParams with one element too many.
        let mut sp = encode(&SamplingParams::new(1)).unwrap();
        assert_eq!(sp[..3], [0xdc, 0x00, 20], "an array16 of 20 fields");
        sp[2] += 1; // 20 -> 21 elements
        sp.push(0xc0);
        assert!(decode::<SamplingParams>(&sp).is_err());
    }

    #[test]
    fn trailing_bytes_are_an_error() {
        let mut bytes = encode(&sample_request()).unwrap();
        bytes.push(0xc0);
        assert!(matches!(
            decode::<EngineCoreRequest>(&bytes),
            Err(WireError::TrailingBytes(1))
        ));
        bytes.truncate(bytes.len() - 3);
        assert!(decode::<EngineCoreRequest>(&bytes).is_err());
    }

    #[test]
    fn options_and_floats_encode_like_msgspec() {
        let out = EngineCoreOutput {
            request_id: "a".into(),
            new_token_ids: vec![],
            finish_reason: None,
            stop_token_id: None,
            new_logprobs: None,
            num_cached_tokens: 0,
            error_message: None,
            prompt_logprobs: None,
            queue_time: None,
            prefill_time: None,
            error_kind: None,
            decode_time: None,
            pooling_output: None,
        };
        // msgspec: [ "a", [], nil, nil, nil, 0, nil, nil, nil, nil, nil, nil, nil ]
        assert_eq!(
            encode(&out).unwrap(),
            vec![
                0x9d, 0xa1, b'a', 0x90, 0xc0, 0xc0, 0xc0, 0x00, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0, 0xc0,
                0xc0
            ]
        );
        let bytes = encode(&SchedulerStats {
            kv_cache_usage: 0.0,
            ..Default::default()
        })
        .unwrap();
        assert_eq!(bytes[3], 0xcb, "floats are always float64");
    }

    #[test]
    fn error_kind_marks_an_invalid_request() {
        assert_eq!(ErrorKind::InvalidRequest.as_str(), "invalid_request");
        let bytes = encode(&("r", Vec::<u32>::new(), "error")).unwrap();
        let mut out: EngineCoreOutput = decode(&bytes).unwrap();
        assert_eq!(out.error_kind, None, "an older engine's output has no kind");
        assert!(!out.is_invalid_request());
        out.error_kind = Some(ErrorKind::InvalidRequest.to_string());
        assert!(out.is_invalid_request());
        out.finish_reason = Some("stop".into());
        assert!(!out.is_invalid_request(), "only an error ending is a 400");
    }

    #[test]
    fn structured_outputs_travel_positionally() {
        let so = StructuredOutputs {
            regex: Some("[0-9]+".into()),
            ..Default::default()
        };
        // msgspec: [nil, "[0-9]+", nil, nil, false, nil]
        let mut expected = vec![0x96, 0xc0, 0xa6];
        expected.extend_from_slice(b"[0-9]+");
        expected.extend_from_slice(&[0xc0, 0xc0, 0xc2, 0xc0]);
        assert_eq!(encode(&so).unwrap(), expected);
        let mut sp = SamplingParams::new(4);
        sp.structured_outputs = Some(so);
        assert_eq!(decode::<SamplingParams>(&encode(&sp).unwrap()).unwrap(), sp);
        // An older frontend's 17-field SamplingParams means "no constraint" (and no
        // thinking budget, no extra args).
        let old = encode(&SamplingParams::new(4)).unwrap();
        let mut short = vec![0xdc, 0x00, 17];
        short.extend_from_slice(&old[3..old.len() - 3]);
        assert_eq!(
            decode::<SamplingParams>(&short).unwrap(),
            SamplingParams::new(4)
        );
    }

    #[test]
    fn extra_args_are_a_string_keyed_map_or_nil() {
        let mut sp = SamplingParams::new(4);
        sp.extra_args = Some(Value::Map(vec![(Value::from("k"), Value::from(1))]));
        assert_eq!(decode::<SamplingParams>(&encode(&sp).unwrap()).unwrap(), sp);
        sp.extra_args = Some(Value::Map(vec![(Value::from(1), Value::from(1))]));
        assert!(decode::<SamplingParams>(&encode(&sp).unwrap()).is_err());
        sp.extra_args = Some(Value::from("not a map"));
        assert!(decode::<SamplingParams>(&encode(&sp).unwrap()).is_err());
        sp.extra_args = None;
        assert_eq!(decode::<SamplingParams>(&encode(&sp).unwrap()).unwrap(), sp);
    }

    #[test]
    fn init_requires_a_string_keyed_map() {
        let ok = Init {
            input_address: "ipc:///a".into(),
            output_address: "ipc:///b".into(),
            engine_config: Value::Map(vec![(Value::from("mock"), Value::from(true))]),
        };
        assert_eq!(decode::<Init>(&encode(&ok).unwrap()).unwrap(), ok);
        let bad = ("a", "b", vec![1u8]);
        assert!(decode::<Init>(&encode(&bad).unwrap()).is_err());
        let bad_keys = Init {
            engine_config: Value::Map(vec![(Value::from(1), Value::Nil)]),
            ..ok
        };
        assert!(decode::<Init>(&encode(&bad_keys).unwrap()).is_err());
    }

    #[test]
    fn utility_values_round_trip() {
        let out = UtilityOutput {
            call_id: u64::MAX,
            success: true,
            result: Value::Array(vec![
                Value::from(i64::MIN),
                Value::from(2.5f64),
                Value::Binary(vec![0, 255]),
                Value::from("日本"),
                Value::Nil,
            ]),
            error_message: None,
        };
        let bytes = encode(&out).unwrap();
        assert_eq!(decode::<UtilityOutput>(&bytes).unwrap(), out);
        assert_eq!(
            encode(&decode::<UtilityOutput>(&bytes).unwrap()).unwrap(),
            bytes
        );
    }

    #[test]
    fn constants_and_bytes() {
        assert_eq!(engine_identity(1), [1, 0]);
        assert_eq!(engine_identity(0x0102), [2, 1]);
        assert_eq!(HandshakeKind::try_from(0x12).unwrap(), HandshakeKind::Ready);
        assert_eq!(HandshakeKind::Failed.as_byte(), 0x13);
        assert!(HandshakeKind::try_from(0x14).is_err());
        assert_eq!(RequestType::try_from(2).unwrap(), RequestType::Utility);
        assert!(RequestType::try_from(3).is_err());
        assert_eq!(ENGINE_DEAD_SENTINEL, b"VRS_ENGINE_DEAD");
        assert_eq!(PROTOCOL_VERSION, 1);
        for r in [
            FinishReason::Stop,
            FinishReason::Length,
            FinishReason::Abort,
            FinishReason::Error,
        ] {
            assert_eq!(r.as_str().parse::<FinishReason>().unwrap(), r);
        }
        assert!("eos".parse::<FinishReason>().is_err());
        for t in PoolingTask::ALL {
            assert_eq!(PoolingTask::from_wire(t.as_str()), Some(t));
        }
        assert_eq!(PoolingTask::from_wire("token_embed"), None);
    }
}
