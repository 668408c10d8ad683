//! `vrs-rs render` settings: the `--args-json` map of `vrs render` (docs/internals.md)
//! and the equivalent standalone flags.

use clap::Args;
use serde::Deserialize;

use crate::args::{CommandArgs, CommonCli, Specific};

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

    #[command(flatten)]
    pub common: CommonCli,

    /// Longest prompt + output in tokens (default: config.json's max_position_embeddings).
    #[arg(long)]
    pub max_model_len: Option<u64>,
}

/// The resolved settings of one `render` run.
pub type RenderArgs = CommandArgs<RenderSpecific>;

/// The settings of `render` alone.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RenderSpecific {
    #[serde(default)]
    pub max_model_len: Option<u64>,
}

impl Specific for RenderSpecific {
    fn check(args: &RenderArgs) -> Result<(), String> {
        if args.specific.max_model_len == Some(0) {
            return Err("max_model_len must be >= 1; got 0".into());
        }
        Ok(())
    }
}

impl RenderArgs {
    /// Builds the settings from the standalone flags (or `--args-json` when given).
    pub fn from_cli(cli: RenderCli) -> Result<Self, String> {
        if let Some(text) = &cli.args_json {
            return Self::from_json(text);
        }
        let specific = RenderSpecific {
            max_model_len: cli.max_model_len,
        };
        cli.common.into_args(specific)
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
