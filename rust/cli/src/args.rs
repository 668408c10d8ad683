//! `vrs-rs serve` settings: the `--args-json` contract (docs/internals.md) and the
//! equivalent standalone flags. The settings `render` takes too are in `args_common.rs`.

use clap::Args;
use serde::Deserialize;
use serde_json::{Map, Value};

#[path = "args_common.rs"]
mod common;
use common::DEFAULT_HOST;
pub use common::{tracing_level, CommandArgs, CommonCli, Specific};

/// Flags of `vrs-rs serve`. `--args-json` (what the `vrs` app passes) and the individual
/// flags (standalone use) are mutually exclusive.
#[derive(Debug, Args)]
pub struct ServeCli {
    /// Every setting as one JSON object (keys: model, served_model_name, host, port,
    /// log_level, shutdown_timeout, python_executable, chat_template, engine_config,
    /// api_key, max_request_body, max_concurrent_requests, request_timeout,
    /// tool_call_parser, reasoning_parser, data_parallel_size, data_parallel_size_local,
    /// data_parallel_address, data_parallel_rpc_port; see docs/internals.md).
    #[arg(long, value_name = "JSON", conflicts_with_all = [
        "model", "host", "port", "served_model_name", "log_level", "shutdown_timeout",
        "python_executable", "chat_template", "mock", "max_model_len", "engine_config",
        "api_key", "max_request_body", "max_concurrent_requests", "request_timeout",
        "tool_call_parser", "reasoning_parser", "data_parallel_size",
        "data_parallel_size_local", "data_parallel_address", "data_parallel_rpc_port",
    ])]
    pub args_json: Option<String>,

    #[command(flatten)]
    pub common: CommonCli,

    /// Seconds to let in-flight requests finish after SIGINT/SIGTERM.
    #[arg(long)]
    pub shutdown_timeout: Option<f64>,

    /// Interpreter that runs `python -m engine --headless`.
    #[arg(long)]
    pub python_executable: Option<String>,

    /// Run the mock engine (random tokens, no weights).
    #[arg(long)]
    pub mock: bool,

    /// Longest prompt + output in tokens (default: the model's).
    #[arg(long)]
    pub max_model_len: Option<u64>,

    /// Extra engine settings as a JSON object (see engine/config.py), merged into the
    /// engine config.
    #[arg(long, value_name = "JSON")]
    pub engine_config: Option<String>,

    /// Require `Authorization: Bearer KEY` on /v1/* (default: $VRS_API_KEY, else none).
    #[arg(long, value_name = "KEY")]
    pub api_key: Option<String>,

    /// Largest request body in bytes (413 above it).
    #[arg(long, value_name = "BYTES")]
    pub max_request_body: Option<usize>,

    /// Generation requests in flight at most (429 with Retry-After above it).
    #[arg(long, value_name = "N")]
    pub max_concurrent_requests: Option<usize>,

    /// Seconds a generation request may take (504, or an SSE error event, after it).
    #[arg(long, value_name = "SECONDS")]
    pub request_timeout: Option<f64>,

    /// Tool-call format: auto (from the chat template), none, demo or hermes.
    #[arg(long, value_name = "NAME")]
    pub tool_call_parser: Option<String>,

    /// Split `<think>…</think>` into reasoning_content: deepseek_r1 or qwen3.
    #[arg(long, value_name = "NAME")]
    pub reasoning_parser: Option<String>,

    /// Engines to start (data parallel; requests go to the least loaded).
    #[arg(long, value_name = "N")]
    pub data_parallel_size: Option<u16>,

    /// Engines of --data-parallel-size started here (default: all); the others join
    /// over tcp:// (`vrs serve --headless --handshake-address tcp://ADDRESS:PORT`).
    #[arg(long, value_name = "K")]
    pub data_parallel_size_local: Option<u16>,

    /// Address the engine sockets bind to when engines join from elsewhere.
    #[arg(long, value_name = "HOST")]
    pub data_parallel_address: Option<String>,

    /// Handshake port remote engines connect to.
    #[arg(long, value_name = "PORT")]
    pub data_parallel_rpc_port: Option<u16>,
}

/// The resolved settings of one `serve` run.
pub type ServeArgs = CommandArgs<ServeSpecific>;

/// The settings of `serve` alone.
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
    #[serde(default)]
    pub data_parallel_size: Option<u16>,
    #[serde(default)]
    pub data_parallel_size_local: Option<u16>,
    #[serde(default)]
    pub data_parallel_address: Option<String>,
    #[serde(default)]
    pub data_parallel_rpc_port: Option<u16>,
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
        if let Some(t) = own.request_timeout {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!("request_timeout must be > 0 seconds, got {t}"));
            }
        }
        if let Some(name) = own.tool_call_parser.as_deref() {
            crate::tools::pick_parser(Some(name), None)?;
        }
        crate::reasoning::check_parser(own.reasoning_parser.as_deref())?;
        Ok(())
    }
}

impl ServeArgs {
    /// Builds the settings from the standalone flags (or `--args-json` when given).
    pub fn from_cli(cli: ServeCli) -> Result<Self, String> {
        if let Some(text) = &cli.args_json {
            return Self::from_json(text);
        }
        let model = cli.common.model.as_deref().ok_or("MODEL is required")?;
        let mut engine_config = match &cli.engine_config {
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => return Err("--engine-config must be a JSON object".into()),
                Err(e) => return Err(format!("invalid --engine-config: {e}")),
            },
            None => Map::new(),
        };
        engine_config.insert("model".into(), Value::String(model.to_owned()));
        if cli.mock {
            engine_config.insert("mock".into(), Value::Bool(true));
        }
        if let Some(len) = cli.max_model_len {
            engine_config.insert("max_model_len".into(), Value::from(len));
        }
        if let Some(name) = &cli.common.served_model_name {
            engine_config.insert("served_model_name".into(), Value::String(name.clone()));
        }
        if let Some(level) = &cli.common.log_level {
            engine_config.insert("log_level".into(), Value::String(level.clone()));
        }
        let specific = ServeSpecific {
            shutdown_timeout: cli.shutdown_timeout,
            python_executable: cli.python_executable,
            engine_config: Some(engine_config),
            api_key: cli.api_key,
            max_request_body: cli.max_request_body,
            max_concurrent_requests: cli.max_concurrent_requests,
            request_timeout: cli.request_timeout,
            tool_call_parser: cli.tool_call_parser,
            reasoning_parser: cli.reasoning_parser,
            data_parallel_size: cli.data_parallel_size,
            data_parallel_size_local: cli.data_parallel_size_local,
            data_parallel_address: cli.data_parallel_address,
            data_parallel_rpc_port: cli.data_parallel_rpc_port,
        };
        cli.common.into_args(specific)
    }

    /// The API key: `api_key`, else `$VRS_API_KEY`; empty means none.
    pub fn api_key(&self) -> Option<String> {
        self.specific
            .api_key
            .clone()
            .or_else(|| std::env::var(API_KEY_ENV).ok())
            .filter(|k| !k.is_empty())
    }

    /// Engines `serve` starts (1 unless data parallel).
    pub fn data_parallel_size(&self) -> u16 {
        self.specific.data_parallel_size.unwrap_or(1)
    }

    /// Engines `serve` starts itself (the rest join over tcp://).
    pub fn data_parallel_size_local(&self) -> u16 {
        self.specific
            .data_parallel_size_local
            .unwrap_or_else(|| self.data_parallel_size())
    }

    /// Where remote engines reach the engine sockets (default 127.0.0.1).
    pub fn data_parallel_address(&self) -> &str {
        self.specific
            .data_parallel_address
            .as_deref()
            .unwrap_or(DEFAULT_HOST)
    }

    /// The handshake port remote engines connect to.
    pub fn data_parallel_rpc_port(&self) -> u16 {
        self.specific
            .data_parallel_rpc_port
            .unwrap_or(DEFAULT_DATA_PARALLEL_RPC_PORT)
    }

    pub fn max_request_body(&self) -> usize {
        self.specific
            .max_request_body
            .unwrap_or(DEFAULT_MAX_REQUEST_BODY)
    }

    pub fn request_timeout(&self) -> Option<std::time::Duration> {
        self.specific
            .request_timeout
            .map(std::time::Duration::from_secs_f64)
    }

    pub fn shutdown_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(
            self.specific
                .shutdown_timeout
                .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT_S),
        )
    }

    pub fn python_executable(&self) -> &str {
        self.specific
            .python_executable
            .as_deref()
            .unwrap_or(DEFAULT_PYTHON)
    }

    /// The map sent in INIT: `engine_config` as given, with `model` filled in when absent.
    pub fn engine_config(&self) -> Map<String, Value> {
        let mut map = self.specific.engine_config.clone().unwrap_or_default();
        map.entry("model")
            .or_insert_with(|| Value::String(self.model.clone()));
        map
    }
}

#[cfg(test)]
#[path = "args_tests.rs"]
mod tests;
