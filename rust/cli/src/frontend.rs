//! `vrs-rs frontend`: its flags (the fds and addresses `vrs frontend` hands over, see
//! [`vrs_server::lifecycle::frontend`]) and the redacted command line it logs.

use std::os::fd::RawFd;

use clap::Args;
use serde_json::Value;
use vrs_server::args::ServeArgs;
use vrs_server::lifecycle::frontend::Inherited;

/// Flags of `vrs-rs frontend` (normally passed by `vrs frontend`).
#[derive(Debug, Args)]
pub struct FrontendCli {
    /// Inherited listening TCP socket to serve HTTP on.
    #[arg(long, value_name = "FD")]
    pub listen_fd: RawFd,

    /// Inherited listening socket that becomes the engines' input ROUTER.
    #[arg(long, value_name = "FD")]
    pub input_listener_fd: RawFd,

    /// Inherited listening socket that becomes the engines' output PULL.
    #[arg(long, value_name = "FD")]
    pub output_listener_fd: RawFd,

    /// Address the input listener is bound to (ipc://PATH or tcp://HOST:PORT), as the
    /// engines were told in INIT.
    #[arg(long, value_name = "ADDRESS")]
    pub input_address: String,

    /// Address the output listener is bound to.
    #[arg(long, value_name = "ADDRESS")]
    pub output_address: String,

    /// Index of the first engine served here.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub engine_start_index: u16,

    /// Number of engines served here (each sends READY on the input socket).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub engine_count: u16,

    /// Engines in the whole deployment (default: --engine-count).
    #[arg(long, value_name = "N")]
    pub data_parallel_size: Option<u16>,

    /// The settings of `vrs-rs serve --args-json` (host and port only name the
    /// inherited socket; python_executable and engine_config are the parent's business).
    #[arg(long, value_name = "JSON")]
    pub args_json: String,
}

impl FrontendCli {
    /// The serve settings, after checking the engine counts.
    pub fn serve_args(&self) -> Result<ServeArgs, String> {
        if self.engine_count == 0 {
            return Err("--engine-count must be at least 1".into());
        }
        let dp = self.data_parallel_size.unwrap_or(self.engine_count);
        if u32::from(self.engine_start_index) + u32::from(self.engine_count) > u32::from(dp) {
            return Err(format!(
                "engines {}..{} do not fit in --data-parallel-size {dp}",
                self.engine_start_index,
                u32::from(self.engine_start_index) + u32::from(self.engine_count)
            ));
        }
        ServeArgs::from_json(&self.args_json)
    }

    /// The inherited sockets and the engines behind them.
    pub fn inherited(&self) -> Inherited {
        Inherited {
            listen_fd: self.listen_fd,
            input_listener_fd: self.input_listener_fd,
            output_listener_fd: self.output_listener_fd,
            input_address: self.input_address.clone(),
            output_address: self.output_address.clone(),
            engine_start_index: self.engine_start_index,
            engine_count: self.engine_count,
        }
    }
}

/// Keys whose values are secrets: `api_key(s)`, `token` and `*_token`.
fn secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('-', "_");
    key == "api_key" || key == "api_keys" || key == "token" || key.ends_with("_token")
}

fn redact_json(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if secret_key(key) && !item.is_null() {
                    *item = Value::String("***".into());
                } else {
                    redact_json(item);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_json),
        _ => {}
    }
}

/// A command line for the log: values of `--api-key`/`--token`-like flags (`--x v` and
/// `--x=v`) and of secret keys inside `--args-json` replaced by `***`.
pub fn redact(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut pending: Option<bool> = None;
    for arg in argv {
        if let Some(secret) = pending.take() {
            out.push(redact_value(arg, secret));
            continue;
        }
        match arg.split_once('=').filter(|_| arg.starts_with("--")) {
            Some((flag, value)) => match flag_kind(flag) {
                Some(secret) => out.push(format!("{flag}={}", redact_value(value, secret))),
                None => out.push(arg.clone()),
            },
            None => {
                pending = flag_kind(arg);
                out.push(arg.clone());
            }
        }
    }
    out
}

/// `Some(true)`: the flag's value is a secret; `Some(false)`: it is JSON to redact.
fn flag_kind(flag: &str) -> Option<bool> {
    let name = flag.strip_prefix("--")?;
    if secret_key(name) {
        Some(true)
    } else if name == "args-json" {
        Some(false)
    } else {
        None
    }
}

fn redact_value(value: &str, secret: bool) -> String {
    if secret {
        return "***".into();
    }
    match serde_json::from_str::<Value>(value) {
        Ok(mut json) => {
            redact_json(&mut json);
            json.to_string()
        }
        Err(_) => value.to_owned(),
    }
}

/// The command line at info level: the binary and its flags, `--args-json`'s value
/// elided (the debug level logs it in full, redacted).
pub fn shorten(argv: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len());
    let mut elide = false;
    for arg in argv {
        if std::mem::take(&mut elide) {
            out.push("'{...}'".into());
        } else if arg.starts_with("--args-json=") {
            out.push("--args-json='{...}'".into());
        } else {
            elide = arg == "--args-json";
            out.push(arg.clone());
        }
    }
    out
}

/// Runs `vrs-rs frontend` to the end; returns the exit code. The command line is logged
/// once (the `vrs frontend` supervisor leaves it to this process).
pub async fn run(cli: FrontendCli, args: ServeArgs) -> u8 {
    let argv: Vec<String> = std::env::args().collect();
    if tracing::enabled!(tracing::Level::DEBUG) {
        tracing::debug!("{}", redact(&argv).join(" "));
    } else {
        tracing::info!("{}", shorten(&argv).join(" "));
    }
    vrs_server::lifecycle::frontend::run(cli.inherited(), args).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn shorten_elides_the_args_json_only() {
        let argv = strings(&[
            "vrs-rs",
            "frontend",
            "--listen-fd",
            "3",
            "--args-json",
            r#"{"model": "m"}"#,
        ]);
        assert_eq!(
            shorten(&argv).join(" "),
            "vrs-rs frontend --listen-fd 3 --args-json '{...}'"
        );
        let joined = strings(&["vrs-rs", r#"--args-json={"a": 1}"#]);
        assert_eq!(shorten(&joined).join(" "), "vrs-rs --args-json='{...}'");
    }

    #[test]
    fn redact_hides_keys_and_tokens_only() {
        let argv = strings(&[
            "vrs-rs",
            "frontend",
            "--listen-fd",
            "3",
            "--api-key",
            "sk-1",
            "--token=t0",
            "--args-json",
            r#"{"model":"/m","api_key":"sk-2","engine_config":{"hf_token":"t1","max_num_batched_tokens":8}}"#,
        ]);
        let out = redact(&argv).join(" ");
        for secret in ["sk-1", "sk-2", "t0", "t1"] {
            assert!(!out.contains(secret), "{secret} leaked: {out}");
        }
        assert!(out.contains("--listen-fd 3") && out.contains("--api-key ***"));
        assert!(out.contains("--token=***") && out.contains("\"max_num_batched_tokens\":8"));
        let inline = redact(&strings(&["--args-json={\"api_key\":\"sk-3\"}"]));
        assert_eq!(inline, ["--args-json={\"api_key\":\"***\"}"]);
    }

    #[test]
    fn engine_counts_are_checked() {
        let cli = |count: u16, start: u16, dp: Option<u16>| FrontendCli {
            listen_fd: 3,
            input_listener_fd: 4,
            output_listener_fd: 5,
            input_address: "ipc:///x".into(),
            output_address: "ipc:///y".into(),
            engine_start_index: start,
            engine_count: count,
            data_parallel_size: dp,
            args_json: format!(
                r#"{{"model": {:?}}}"#,
                std::env::temp_dir().to_string_lossy()
            ),
        };
        assert!(cli(1, 0, None).serve_args().is_ok());
        assert!(cli(0, 0, None)
            .serve_args()
            .unwrap_err()
            .contains("at least 1"));
        assert!(cli(1, 2, Some(2))
            .serve_args()
            .unwrap_err()
            .contains("do not fit"));
        assert!(cli(2, 0, Some(2)).serve_args().is_ok());
        assert!(cli(3, 0, Some(2))
            .serve_args()
            .unwrap_err()
            .contains("do not fit"));
        assert!(cli(1, 1, Some(2)).serve_args().is_ok());
    }
}
