//! The settings `vrs-rs serve` and `vrs-rs render` share (a child of `args`): their
//! `--args-json` keys ([`CommandArgs`]) and flags ([`CommonCli`]).

use std::path::Path;

use clap::Args;
use serde::de::DeserializeOwned;
use serde::Deserialize;

pub const DEFAULT_HOST: &str = "127.0.0.1";
pub const DEFAULT_PORT: u16 = 8000;

/// The flags `serve` and `render` share (keys of [`CommandArgs`]).
#[derive(Debug, Args)]
pub struct CommonCli {
    /// Model directory (HF layout: config.json, tokenizer.json, tokenizer_config.json;
    /// `render` reads no weights).
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
}

impl CommonCli {
    /// The settings of these flags with the command's own (`specific`), checked.
    pub fn into_args<T: Specific>(self, specific: T) -> Result<CommandArgs<T>, String> {
        let args = CommandArgs {
            model: self.model.ok_or("MODEL is required")?,
            served_model_name: self.served_model_name,
            host: self.host,
            port: self.port,
            log_level: self.log_level,
            chat_template: self.chat_template,
            specific,
        };
        args.check()?;
        Ok(args)
    }
}

/// The resolved settings of one `serve` or `render` run: the keys both take, and the
/// command's own (`T`, the other keys of the same JSON object).
#[derive(Debug, Clone, PartialEq, Deserialize)]
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

    fn check(&self) -> Result<(), String> {
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
        T::check(self)
    }
}

impl<T> CommandArgs<T> {
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
