//! `vrs-rs serve` settings: the `--args-json` contract (docs/internals.md) and the
//! equivalent standalone flags.

use std::path::Path;

use clap::Args;
use serde::Deserialize;
use serde_json::{Map, Value};

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

    /// Model directory (HF layout: config.json, tokenizer.json, tokenizer_config.json).
    #[arg(required_unless_present = "args_json")]
    pub model: Option<String>,

    /// Address to bind the HTTP server to.
    #[arg(long)]
    pub host: Option<String>,

    /// HTTP port (0 picks a free one; the log line "listening on" tells which).
    #[arg(long)]
    pub port: Option<u16>,

    /// Model name reported by /v1/models and accepted in requests (default: MODEL).
    #[arg(long)]
    pub served_model_name: Option<String>,

    /// debug, info, warning or error.
    #[arg(long)]
    pub log_level: Option<String>,

    /// Seconds to let in-flight requests finish after SIGINT/SIGTERM.
    #[arg(long)]
    pub shutdown_timeout: Option<f64>,

    /// Interpreter that runs `python -m engine --headless`.
    #[arg(long)]
    pub python_executable: Option<String>,

    /// A chat template file overriding the model's.
    #[arg(long)]
    pub chat_template: Option<String>,

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
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeArgs {
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
    pub shutdown_timeout: Option<f64>,
    #[serde(default)]
    pub python_executable: Option<String>,
    #[serde(default)]
    pub chat_template: Option<String>,
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

pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 8000;
/// Handshake port for engines joining over tcp:// (vLLM's `--data-parallel-rpc-port`).
pub const DEFAULT_DATA_PARALLEL_RPC_PORT: u16 = 29550;
pub const DEFAULT_SHUTDOWN_TIMEOUT_S: f64 = 30.0;
pub const DEFAULT_PYTHON: &str = "python3";
pub const DEFAULT_MAX_REQUEST_BODY: usize = 32 * 1024 * 1024;
/// Where the API key comes from when `api_key` is not given.
pub const API_KEY_ENV: &str = "VRS_API_KEY";

impl ServeArgs {
    /// Parses and checks an `--args-json` document.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let args: Self =
            serde_json::from_str(text).map_err(|e| format!("invalid --args-json: {e}"))?;
        args.check()?;
        Ok(args)
    }

    /// Builds the settings from the standalone flags (or `--args-json` when given).
    pub fn from_cli(cli: ServeCli) -> Result<Self, String> {
        if let Some(text) = &cli.args_json {
            return Self::from_json(text);
        }
        let model = cli.model.ok_or("MODEL is required")?;
        let mut engine_config = match &cli.engine_config {
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                Ok(_) => return Err("--engine-config must be a JSON object".into()),
                Err(e) => return Err(format!("invalid --engine-config: {e}")),
            },
            None => Map::new(),
        };
        engine_config.insert("model".into(), Value::String(model.clone()));
        if cli.mock {
            engine_config.insert("mock".into(), Value::Bool(true));
        }
        if let Some(len) = cli.max_model_len {
            engine_config.insert("max_model_len".into(), Value::from(len));
        }
        if let Some(name) = &cli.served_model_name {
            engine_config.insert("served_model_name".into(), Value::String(name.clone()));
        }
        if let Some(level) = &cli.log_level {
            engine_config.insert("log_level".into(), Value::String(level.clone()));
        }
        let args = Self {
            model,
            served_model_name: cli.served_model_name,
            host: cli.host,
            port: cli.port,
            log_level: cli.log_level,
            shutdown_timeout: cli.shutdown_timeout,
            python_executable: cli.python_executable,
            chat_template: cli.chat_template,
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
        args.check()?;
        Ok(args)
    }

    fn check(&self) -> Result<(), String> {
        if !Path::new(&self.model).is_dir() {
            return Err(format!("model directory {:?} does not exist", self.model));
        }
        if let Some(t) = self.shutdown_timeout {
            if !(t.is_finite() && t >= 0.0) {
                return Err(format!("shutdown_timeout must be >= 0 seconds, got {t}"));
            }
        }
        if let Some(level) = &self.log_level {
            tracing_level(level)?;
        }
        if let Some(path) = &self.chat_template {
            if !Path::new(path).is_file() {
                return Err(format!("chat template file {path:?} does not exist"));
            }
        }
        if self.max_request_body == Some(0) {
            return Err("max_request_body must be >= 1 byte, got 0".into());
        }
        if self.data_parallel_size == Some(0) {
            return Err("data_parallel_size must be >= 1, got 0".into());
        }
        if self.data_parallel_size_local() > self.data_parallel_size() {
            return Err(format!(
                "data_parallel_size_local {} exceeds data_parallel_size {}",
                self.data_parallel_size_local(),
                self.data_parallel_size()
            ));
        }
        if self.max_concurrent_requests == Some(0) {
            return Err("max_concurrent_requests must be >= 1, got 0".into());
        }
        if let Some(t) = self.request_timeout {
            if !(t.is_finite() && t > 0.0) {
                return Err(format!("request_timeout must be > 0 seconds, got {t}"));
            }
        }
        if let Some(name) = self.tool_call_parser.as_deref() {
            crate::tools::pick_parser(Some(name), None)?;
        }
        crate::reasoning::check_parser(self.reasoning_parser.as_deref())?;
        Ok(())
    }

    /// The API key: `api_key`, else `$VRS_API_KEY`; empty means none.
    pub fn api_key(&self) -> Option<String> {
        self.api_key
            .clone()
            .or_else(|| std::env::var(API_KEY_ENV).ok())
            .filter(|k| !k.is_empty())
    }

    /// Engines `serve` starts (1 unless data parallel).
    pub fn data_parallel_size(&self) -> u16 {
        self.data_parallel_size.unwrap_or(1)
    }

    /// Engines `serve` starts itself (the rest join over tcp://).
    pub fn data_parallel_size_local(&self) -> u16 {
        self.data_parallel_size_local
            .unwrap_or_else(|| self.data_parallel_size())
    }

    /// Where remote engines reach the engine sockets (default 127.0.0.1).
    pub fn data_parallel_address(&self) -> &str {
        self.data_parallel_address
            .as_deref()
            .unwrap_or(DEFAULT_HOST)
    }

    /// The handshake port remote engines connect to.
    pub fn data_parallel_rpc_port(&self) -> u16 {
        self.data_parallel_rpc_port
            .unwrap_or(DEFAULT_DATA_PARALLEL_RPC_PORT)
    }

    pub fn max_request_body(&self) -> usize {
        self.max_request_body.unwrap_or(DEFAULT_MAX_REQUEST_BODY)
    }

    pub fn request_timeout(&self) -> Option<std::time::Duration> {
        self.request_timeout.map(std::time::Duration::from_secs_f64)
    }

    pub fn served_model_name(&self) -> &str {
        self.served_model_name.as_deref().unwrap_or(&self.model)
    }

    pub fn host(&self) -> &str {
        self.host.as_deref().unwrap_or(DEFAULT_HOST)
    }

    pub fn port(&self) -> u16 {
        self.port.unwrap_or(DEFAULT_PORT)
    }

    pub fn shutdown_timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(
            self.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT_S),
        )
    }

    pub fn python_executable(&self) -> &str {
        self.python_executable.as_deref().unwrap_or(DEFAULT_PYTHON)
    }

    pub fn log_level(&self) -> &str {
        self.log_level.as_deref().unwrap_or("info")
    }

    /// The map sent in INIT: `engine_config` as given, with `model` filled in when absent.
    pub fn engine_config(&self) -> Map<String, Value> {
        let mut map = self.engine_config.clone().unwrap_or_default();
        map.entry("model")
            .or_insert_with(|| Value::String(self.model.clone()));
        map
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        serve: ServeCli,
    }

    fn model_dir() -> String {
        std::env::temp_dir().to_string_lossy().into_owned()
    }

    #[test]
    fn args_json_with_all_keys() {
        let text = serde_json::json!({
            "model": model_dir(), "served_model_name": "demo", "host": "127.0.0.1",
            "port": 8123, "log_level": "warning", "shutdown_timeout": 2.5,
            "python_executable": "/usr/bin/python3", "chat_template": null,
            "engine_config": {"model": "/m", "mock": true, "max_model_len": 64}
        })
        .to_string();
        let args = ServeArgs::from_json(&text).unwrap();
        assert_eq!(args.served_model_name(), "demo");
        assert_eq!(args.port(), 8123);
        assert_eq!(
            args.shutdown_timeout(),
            std::time::Duration::from_millis(2500)
        );
        assert_eq!(args.engine_config()["model"], "/m");
        assert_eq!(tracing_level(args.log_level()).unwrap(), "warn");
    }

    #[test]
    fn args_json_nulls_take_defaults() {
        let text = format!(
            r#"{{"model": {:?}, "served_model_name": null, "host": null, "port": null,
                "log_level": null, "shutdown_timeout": null, "python_executable": null,
                "chat_template": null, "engine_config": null}}"#,
            model_dir()
        );
        let args = ServeArgs::from_json(&text).unwrap();
        assert_eq!(args.host(), DEFAULT_HOST);
        assert_eq!(args.port(), DEFAULT_PORT);
        assert_eq!(args.served_model_name(), model_dir());
        assert_eq!(args.python_executable(), DEFAULT_PYTHON);
        assert_eq!(args.engine_config()["model"], Value::String(model_dir()));
    }

    #[test]
    fn args_json_errors_name_the_problem() {
        let err = ServeArgs::from_json("{").unwrap_err();
        assert!(err.starts_with("invalid --args-json"), "{err}");
        let unknown = format!(r#"{{"model": {:?}, "bogus": 1}}"#, model_dir());
        assert!(ServeArgs::from_json(&unknown)
            .unwrap_err()
            .contains("bogus"));
        let missing = ServeArgs::from_json(r#"{"model": "/definitely/not/here"}"#).unwrap_err();
        assert!(missing.contains("does not exist"), "{missing}");
        let level = format!(r#"{{"model": {:?}, "log_level": "loud"}}"#, model_dir());
        assert!(ServeArgs::from_json(&level)
            .unwrap_err()
            .contains("log_level"));
        let timeout = format!(r#"{{"model": {:?}, "shutdown_timeout": -1}}"#, model_dir());
        assert!(ServeArgs::from_json(&timeout)
            .unwrap_err()
            .contains("shutdown_timeout"));
        for (key, value, words) in [
            ("request_timeout", "0", "request_timeout"),
            ("max_request_body", "0", "max_request_body"),
            ("max_concurrent_requests", "0", "max_concurrent_requests"),
            ("tool_call_parser", "\"xml\"", "demo"),
            ("reasoning_parser", "\"o1\"", "deepseek_r1"),
        ] {
            let text = format!(r#"{{"model": {:?}, "{key}": {value}}}"#, model_dir());
            let err = ServeArgs::from_json(&text).unwrap_err();
            assert!(err.contains(words), "{key}: {err}");
        }
        let ok = format!(
            r#"{{"model": {:?}, "api_key": "k", "max_request_body": 10,
                "max_concurrent_requests": 2, "request_timeout": 1.5,
                "tool_call_parser": "auto", "reasoning_parser": "qwen3"}}"#,
            model_dir()
        );
        let args = ServeArgs::from_json(&ok).unwrap();
        assert_eq!(args.api_key().as_deref(), Some("k"));
        assert_eq!(args.max_request_body(), 10);
        assert_eq!(
            args.request_timeout(),
            Some(std::time::Duration::from_millis(1500))
        );
        let port = format!(r#"{{"model": {:?}, "port": 70000}}"#, model_dir());
        assert!(ServeArgs::from_json(&port).is_err());
    }

    #[test]
    fn standalone_flags_build_the_engine_config() {
        let dir = model_dir();
        let w = Wrapper::try_parse_from([
            "x",
            &dir,
            "--mock",
            "--max-model-len",
            "128",
            "--port",
            "0",
            "--engine-config",
            r#"{"seed": 3}"#,
        ])
        .unwrap();
        let args = ServeArgs::from_cli(w.serve).unwrap();
        let config = args.engine_config();
        assert_eq!(config["mock"], true);
        assert_eq!(config["max_model_len"], 128);
        assert_eq!(config["seed"], 3);
        assert_eq!(config["model"], Value::String(dir));
        assert_eq!(args.port(), 0);
    }

    #[test]
    fn args_json_conflicts_with_flags() {
        let r = Wrapper::try_parse_from(["x", "--args-json", "{}", "--port", "1"]);
        assert!(r.is_err());
        assert!(
            Wrapper::try_parse_from(["x"]).is_err(),
            "MODEL or --args-json is required"
        );
        let bad = Wrapper::try_parse_from(["x", "/tmp", "--engine-config", "[1]"]).unwrap();
        assert!(ServeArgs::from_cli(bad.serve)
            .unwrap_err()
            .contains("JSON object"));
    }
}
