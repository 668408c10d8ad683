//! The settings of `vrs-rs serve` and `vrs-rs render`: the `--args-json` contract
//! (docs/internals.md), declared once in `server/args_json.py`, whose JSON Schema
//! (`server/contracts/args.schema.json`) these structs are tested against.
//! [`CommandArgs`] holds the keys both take; [`ServeSpecific`] and [`RenderSpecific`]
//! each command's own. The `vrs-rs` binary maps its flags onto these.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};
use vrs_text::ContentFormatOption;

pub mod engine;
pub mod http;
pub mod render;
mod serve;
pub mod vllm;
mod vllm_keys;

pub use engine::EngineKind;
pub use http::HttpArgs;
pub use render::{RenderArgs, RenderSpecific};

pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 8000;

/// The resolved settings of one `serve` or `render` run: the keys both take, and the
/// command's own (`T`, the other keys of the same JSON object). The keys are those of
/// `server/contracts/args.schema.json` (generated from `server/args_json.py`); the tests
/// in `args/tests/schema.rs` hold these structs to that file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize, Default))]
#[serde(deny_unknown_fields)]
pub struct CommandArgs<T> {
    pub model: String,
    #[serde(default)]
    pub served_model_name: Option<String>,
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub log_level: Option<String>,
    #[serde(default)]
    pub chat_template: Option<String>,
    /// A directory with tokenizer.json (and tokenizer_config.json) used instead of the
    /// model's; absent or null: the model directory.
    #[serde(default)]
    pub tokenizer: Option<String>,
    /// `--chat-template-content-format`: auto (default), string or openai.
    #[serde(default)]
    pub chat_template_content_format: Option<String>,
    /// TLS, the Unix socket, CORS, request ids and connection limits.
    #[serde(default, deserialize_with = "http::object")]
    pub http: HttpArgs,
    #[serde(flatten)]
    pub specific: T,
}

/// A command's own settings in [`CommandArgs`].
pub trait Specific: DeserializeOwned {
    /// Checks them; the shared settings are checked already.
    fn check(args: &CommandArgs<Self>) -> Result<(), String>;
}

impl<T: Specific> CommandArgs<T> {
    /// Parses and checks an `--args-json` document.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let args: Self =
            serde_json::from_str(text).map_err(|e| format!("invalid --args-json: {e}"))?;
        args.check()?;
        Ok(args)
    }

    /// Checks settings built from flags (as [`Self::from_json`] checks a document).
    pub fn check(&self) -> Result<(), String> {
        if !Path::new(&self.model).is_dir() {
            return Err(format!("model directory {:?} does not exist", self.model));
        }
        if let Some(level) = &self.log_level {
            tracing_level(level)?;
        }
        if let Some(path) = &self.chat_template {
            if !Path::new(path).is_file() {
                return Err(format!("chat template file {path:?} does not exist"));
            }
        }
        if let Some(dir) = &self.tokenizer {
            if !Path::new(dir).is_dir() {
                return Err(format!("tokenizer directory {dir:?} does not exist"));
            }
        }
        self.content_format()?;
        self.http.check()?;
        T::check(self)
    }
}

impl<T> CommandArgs<T> {
    pub fn served_model_name(&self) -> &str {
        self.served_model_name.as_deref().unwrap_or(&self.model)
    }

    /// The directory the tokenizer and its config load from: `tokenizer`, else `model`.
    pub fn tokenizer_dir(&self) -> &str {
        self.tokenizer.as_deref().unwrap_or(&self.model)
    }

    pub fn host(&self) -> &str {
        self.host.as_deref().unwrap_or(DEFAULT_HOST)
    }

    pub fn port(&self) -> u16 {
        self.port.unwrap_or(DEFAULT_PORT)
    }

    pub fn log_level(&self) -> &str {
        self.log_level.as_deref().unwrap_or("info")
    }

    /// `chat_template_content_format`, parsed (absent: `auto`).
    pub fn content_format(&self) -> Result<ContentFormatOption, String> {
        ContentFormatOption::parse(self.chat_template_content_format.as_deref())
    }
}

/// Maps a user log level (Python spelling accepted) to a tracing level name.
pub fn tracing_level(level: &str) -> Result<&'static str, String> {
    match level.to_ascii_lowercase().as_str() {
        "trace" => Ok("trace"),
        "debug" => Ok("debug"),
        "info" => Ok("info"),
        "warn" | "warning" => Ok("warn"),
        "error" | "critical" => Ok("error"),
        other => Err(format!(
            "log_level must be one of debug, info, warning, error; got {other:?}"
        )),
    }
}

/// The resolved settings of one `serve` run.
pub type ServeArgs = CommandArgs<ServeSpecific>;

/// The settings of `serve` alone.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize, Default))]
pub struct ServeSpecific {
    #[serde(default)]
    pub shutdown_timeout: Option<f64>,
    #[serde(default)]
    pub python_executable: Option<String>,
    #[serde(default)]
    pub engine_config: Option<Map<String, Value>>,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub max_request_body: Option<usize>,
    #[serde(default)]
    pub max_concurrent_requests: Option<usize>,
    #[serde(default)]
    pub request_timeout: Option<f64>,
    #[serde(default)]
    pub tool_call_parser: Option<String>,
    #[serde(default)]
    pub reasoning_parser: Option<String>,
    /// `fcfs` or `priority` (vLLM's `--scheduling-policy`; default fcfs).
    #[serde(default)]
    pub scheduling_policy: Option<String>,
    #[serde(default)]
    pub data_parallel_size: Option<u16>,
    #[serde(default)]
    pub data_parallel_size_local: Option<u16>,
    #[serde(default)]
    pub data_parallel_address: Option<String>,
    #[serde(default)]
    pub data_parallel_rpc_port: Option<u16>,
    /// The most prompts one completions request may carry (default 256).
    #[serde(default)]
    pub max_batch_prompts: Option<usize>,
    /// Seconds of silence after which a stream gets a `: keep-alive` comment frame.
    #[serde(default)]
    pub sse_keep_alive_interval: Option<f64>,
    /// Requests waiting for their first token at most (503 above it).
    #[serde(default)]
    pub max_num_queued_reqs: Option<usize>,
    /// Prompt tokens of the requests waiting for their first token at most.
    #[serde(default)]
    pub max_num_queued_tokens: Option<usize>,
    /// Seconds a request may wait for its first token.
    #[serde(default)]
    pub max_queue_wait: Option<f64>,
    /// Where spans are exported over OTLP/HTTP (`None`: no traces).
    #[serde(default)]
    pub otlp_traces_endpoint: Option<String>,
    /// Whether spans carry the engine's queue, prefill and decode times.
    #[serde(default)]
    pub collect_detailed_traces: bool,
    /// Whether Responses API responses are kept (`--enable-responses-store`).
    #[serde(default)]
    pub enable_responses_store: bool,
    /// Responses kept at most (default 1000), the least recently used dropped first.
    #[serde(default)]
    pub responses_store_max_entries: Option<usize>,
    /// Serve `GET /tokenizer_info` (vLLM's `--enable-tokenizer-info-endpoint`).
    #[serde(default)]
    pub enable_tokenizer_info_endpoint: bool,
    /// `vrs` (default) or `vllm`: whose engine, and so which engine wire (see [`engine`]).
    #[serde(default)]
    pub engine: Option<String>,
    /// Interpreter where vllm is installed (engine `vllm`; default `python3`).
    #[serde(default)]
    pub vllm_python: Option<String>,
    /// Replaces `PY -m vllm.entrypoints.cli.main serve MODEL --headless` (a stand-in engine).
    #[serde(default)]
    pub vllm_engine_command: Option<Vec<String>>,
    /// Appended to vLLM's headless engine command (vLLM engine flags).
    #[serde(default)]
    pub vllm_engine_args: Option<Vec<String>>,
}

/// Handshake port for engines joining over tcp:// (vLLM's `--data-parallel-rpc-port`).
pub const DEFAULT_DATA_PARALLEL_RPC_PORT: u16 = 29550;
pub const DEFAULT_SHUTDOWN_TIMEOUT_S: f64 = 30.0;
pub const DEFAULT_PYTHON: &str = "python3";
pub const DEFAULT_MAX_REQUEST_BODY: usize = 32 * 1024 * 1024;
/// Where the API key comes from when `api_key` is not given.
pub const API_KEY_ENV: &str = "VRS_API_KEY";

impl Specific for ServeSpecific {
    fn check(args: &ServeArgs) -> Result<(), String> {
        let own = &args.specific;
        if let Some(t) = own.shutdown_timeout {
            if !(t.is_finite() && t >= 0.0) {
                return Err(format!("shutdown_timeout must be >= 0 seconds, got {t}"));
            }
        }
        if own.max_request_body == Some(0) {
            return Err("max_request_body must be >= 1 byte, got 0".into());
        }
        if own.data_parallel_size == Some(0) {
            return Err("data_parallel_size must be >= 1, got 0".into());
        }
        if args.data_parallel_size_local() > args.data_parallel_size() {
            return Err(format!(
                "data_parallel_size_local {} exceeds data_parallel_size {}",
                args.data_parallel_size_local(),
                args.data_parallel_size()
            ));
        }
        if own.max_concurrent_requests == Some(0) {
            return Err("max_concurrent_requests must be >= 1, got 0".into());
        }
        if own.max_batch_prompts == Some(0) {
            return Err("max_batch_prompts must be >= 1, got 0".into());
        }
        if let Some(t) = own.request_timeout {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!("request_timeout must be > 0 seconds, got {t}"));
            }
        }
        for (key, seconds) in [
            ("sse_keep_alive_interval", own.sse_keep_alive_interval),
            ("max_queue_wait", own.max_queue_wait),
        ] {
            if let Some(t) = seconds {
                if !(t.is_finite() && t > 0.0) {
                    return Err(format!("{key} must be > 0 seconds, got {t}"));
                }
            }
        }
        if own.responses_store_max_entries == Some(0) {
            return Err("responses_store_max_entries must be >= 1, got 0".into());
        }
        if own.collect_detailed_traces && own.otlp_traces_endpoint.is_none() {
            return Err("collect_detailed_traces needs otlp_traces_endpoint".into());
        }
        if let Some(endpoint) = &own.otlp_traces_endpoint {
            crate::edge::trace::traces_url(endpoint)?;
        }
        crate::parsers::select::check_tool_setting(own.tool_call_parser.as_deref())?;
        crate::parsers::select::check_reasoning_setting(own.reasoning_parser.as_deref())?;
        engine::check(own)?;
        if let Some(policy) = own.scheduling_policy.as_deref() {
            if !SCHEDULING_POLICIES.contains(&policy) {
                return Err(format!(
                    "scheduling_policy must be one of {}; got {policy:?}",
                    SCHEDULING_POLICIES.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// vLLM's `--scheduling-policy` values; the first is the default.
pub const SCHEDULING_POLICIES: [&str; 2] = ["fcfs", "priority"];

#[cfg(test)]
mod tests;
