//! `vrs-rs render` settings: the `--args-json` map of `vrs render` (docs/internals.md)
//! and the equivalent standalone flags.

use std::path::Path;

use clap::Args;
use serde::Deserialize;

use crate::args::{tracing_level, DEFAULT_HOST, DEFAULT_PORT};

/// Flags of `vrs-rs render`; `--args-json` and the individual flags are exclusive.
#[derive(Debug, Args)]
pub struct RenderCli {
    /// Every setting as one JSON object (keys: model, served_model_name, host, port,
    /// log_level, chat_template, max_model_len).
    #[arg(long, value_name = "JSON", conflicts_with_all = [
        "model", "host", "port", "served_model_name", "log_level", "chat_template",
        "max_model_len",
    ])]
    pub args_json: Option<String>,

    /// Model directory (tokenizer.json, tokenizer_config.json, config.json; no weights).
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

    /// A chat template file overriding the model's.
    #[arg(long)]
    pub chat_template: Option<String>,

    /// Longest prompt + output in tokens (default: config.json's max_position_embeddings).
    #[arg(long)]
    pub max_model_len: Option<u64>,
}

/// The resolved settings of one `render` run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RenderArgs {
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
    #[serde(default)]
    pub max_model_len: Option<u64>,
}

impl RenderArgs {
    /// Parses and checks an `--args-json` document.
    pub fn from_json(text: &str) -> Result<Self, String> {
        let args: Self =
            serde_json::from_str(text).map_err(|e| format!("invalid --args-json: {e}"))?;
        args.check()?;
        Ok(args)
    }

    /// Builds the settings from the standalone flags (or `--args-json` when given).
    pub fn from_cli(cli: RenderCli) -> Result<Self, String> {
        if let Some(text) = &cli.args_json {
            return Self::from_json(text);
        }
        let args = Self {
            model: cli.model.ok_or("MODEL is required")?,
            served_model_name: cli.served_model_name,
            host: cli.host,
            port: cli.port,
            log_level: cli.log_level,
            chat_template: cli.chat_template,
            max_model_len: cli.max_model_len,
        };
        args.check()?;
        Ok(args)
    }

    fn check(&self) -> Result<(), String> {
        if !Path::new(&self.model).is_dir() {
            return Err(format!("model directory {:?} does not exist", self.model));
        }
        if let Some(level) = &self.log_level {
            tracing_level(level)?;
        }
        if self.max_model_len == Some(0) {
            return Err("max_model_len must be >= 1; got 0".into());
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

    pub fn log_level(&self) -> &str {
        self.log_level.as_deref().unwrap_or("info")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        render: RenderCli,
    }

    fn dir() -> String {
        std::env::temp_dir().to_string_lossy().into_owned()
    }

    #[test]
    fn args_json_and_flags_agree() {
        let json = serde_json::json!({"model": dir(), "served_model_name": "demo",
            "host": "127.0.0.1", "port": 0, "log_level": "debug", "chat_template": null,
            "max_model_len": 512});
        let from_json = RenderArgs::from_json(&json.to_string()).unwrap();
        let d = dir();
        let w = Wrapper::try_parse_from([
            "x",
            &d,
            "--served-model-name",
            "demo",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--log-level",
            "debug",
            "--max-model-len",
            "512",
        ])
        .unwrap();
        assert_eq!(RenderArgs::from_cli(w.render).unwrap(), from_json);
        assert_eq!(from_json.served_model_name(), "demo");
        assert_eq!(from_json.port(), 0);
    }

    #[test]
    fn bad_settings_name_the_problem() {
        let err = |v: serde_json::Value| RenderArgs::from_json(&v.to_string()).unwrap_err();
        assert!(err(serde_json::json!({"model": "/no/such/dir"})).contains("does not exist"));
        assert!(
            err(serde_json::json!({"model": dir(), "engine_config": {}})).contains("engine_config")
        );
        assert!(
            err(serde_json::json!({"model": dir(), "max_model_len": 0})).contains("max_model_len")
        );
        assert!(
            err(serde_json::json!({"model": dir(), "chat_template": "/no/such.jinja"}))
                .contains("chat template")
        );
        assert!(Wrapper::try_parse_from(["x", "--args-json", "{}", "--port", "1"]).is_err());
    }
}
