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
    /// log_level, shutdown_timeout, python_executable, chat_template, engine_config).
    #[arg(long, value_name = "JSON", conflicts_with_all = [
        "model", "host", "port", "served_model_name", "log_level", "shutdown_timeout",
        "python_executable", "chat_template", "mock", "max_model_len", "engine_config",
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
}

pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 8000;
pub const DEFAULT_SHUTDOWN_TIMEOUT_S: f64 = 30.0;
pub const DEFAULT_PYTHON: &str = "python3";

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
        Ok(())
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
