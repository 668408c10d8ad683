//! `vrs-rs frontend`: its flags (the fds and addresses `vrs frontend` hands over, see
//! [`vrs_server::lifecycle::frontend`]) and the redacted command line it logs.

use std::os::fd::RawFd;

use clap::Args;
use serde_json::Value;
use vrs_server::args::vllm::{from_vllm_json, is_vllm_json, VllmFrontendArgs};
use vrs_server::args::ServeArgs;
use vrs_server::lifecycle::frontend::Inherited;
use vrs_server::lifecycle::vllm::frontend::VllmInherited;

/// Flags of `vrs-rs frontend`: vrs's contract (run by `vrs frontend`) or vLLM's (run by
/// `vllm serve` with `VLLM_USE_RUST_FRONTEND=1`), told apart by `--input-address` and
/// `--output-address`, which vrs's contract always passes and vLLM's never does.
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
    /// engines were told in INIT (vrs's contract; under vLLM's it is read from the socket).
    #[arg(long, value_name = "ADDRESS")]
    pub input_address: Option<String>,

    /// Address the output listener is bound to (vrs's contract).
    #[arg(long, value_name = "ADDRESS")]
    pub output_address: Option<String>,

    /// Index of the first engine served here.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub engine_start_index: u16,

    /// Number of engines served here (each sends READY on the input socket).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub engine_count: u16,

    /// Engines in the whole deployment (default: --engine-count).
    #[arg(long, value_name = "N")]
    pub data_parallel_size: Option<u16>,

    /// vLLM's data-parallel coordinator's publish address (vLLM's contract, `vllm serve`
    /// with `--data-parallel-size` > 1): followed for its wave and queue counts.
    #[arg(long, value_name = "ADDRESS")]
    pub coordinator_address: Option<String>,

    /// vLLM's gRPC listener (`vllm serve --grpc-port`): vrs-rs serves no gRPC, refused.
    #[arg(long, value_name = "FD")]
    pub grpc_listen_fd: Option<RawFd>,

    /// The settings: `vrs-rs serve --args-json`'s keys (vrs's contract; host and port only
    /// name the inherited socket, python_executable and engine_config are the parent's
    /// business), or vLLM's non-default `vllm serve` arguments with `model_tag` (vLLM's).
    #[arg(long, value_name = "JSON")]
    pub args_json: String,
}

/// Whose `frontend` contract a command line follows, with its settings.
#[derive(Debug)]
pub enum Contract {
    /// `vrs frontend`'s: vrs's engines and wire.
    Vrs(Box<Inherited>, Box<ServeArgs>),
    /// `vllm serve`'s: vLLM's engines and wire.
    Vllm(VllmInherited, Box<VllmFrontendArgs>),
}

impl Contract {
    pub fn log_level(&self) -> &str {
        match self {
            Self::Vrs(_, args) => args.log_level(),
            Self::Vllm(_, args) => args.serve.log_level(),
        }
    }
}

impl FrontendCli {
    /// Checks the engine counts and tells the contract; errors name the flag or key.
    pub fn contract(&self) -> Result<Contract, String> {
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
        match (&self.input_address, &self.output_address) {
            (Some(input), Some(output)) => {
                for (flag, given) in [
                    ("--coordinator-address", self.coordinator_address.is_some()),
                    ("--grpc-listen-fd", self.grpc_listen_fd.is_some()),
                ] {
                    if given {
                        return Err(format!(
                            "{flag} belongs to vLLM's contract, which passes no --input-address"
                        ));
                    }
                }
                let args = ServeArgs::from_json(&self.args_json)?;
                let inherited = Inherited {
                    listen_fd: self.listen_fd,
                    input_listener_fd: self.input_listener_fd,
                    output_listener_fd: self.output_listener_fd,
                    input_address: input.clone(),
                    output_address: output.clone(),
                    engine_start_index: self.engine_start_index,
                    engine_count: self.engine_count,
                };
                Ok(Contract::Vrs(Box::new(inherited), Box::new(args)))
            }
            (None, None) => self.vllm_contract(),
            _ => Err(
                "give both --input-address and --output-address (vrs's contract) or \
                      neither (vLLM's)"
                    .into(),
            ),
        }
    }

    fn vllm_contract(&self) -> Result<Contract, String> {
        if !is_vllm_json(&self.args_json) {
            return Err(
                "no --input-address/--output-address, so this is vLLM's contract, but \
                        --args-json has no model_tag: vrs's contract needs both addresses"
                    .into(),
            );
        }
        if self.grpc_listen_fd.is_some() {
            return Err(
                "--grpc-listen-fd (vllm serve --grpc-port): vrs-rs serves no gRPC; \
                        drop --grpc-port"
                    .into(),
            );
        }
        let args = from_vllm_json(&self.args_json)?;
        let inherited = VllmInherited {
            listen_fd: self.listen_fd,
            input_listener_fd: self.input_listener_fd,
            output_listener_fd: self.output_listener_fd,
            engine_start_index: self.engine_start_index,
            engine_count: self.engine_count,
            coordinator_address: self.coordinator_address.clone(),
        };
        Ok(Contract::Vllm(inherited, Box::new(args)))
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
/// once (the supervisor, `vrs frontend` or `vllm serve`, leaves it to this process).
pub async fn run(contract: Contract) -> u8 {
    let argv: Vec<String> = std::env::args().collect();
    if tracing::enabled!(tracing::Level::DEBUG) {
        tracing::debug!("{}", redact(&argv).join(" "));
    } else {
        tracing::info!("{}", shorten(&argv).join(" "));
    }
    match contract {
        Contract::Vrs(sockets, args) => vrs_server::lifecycle::frontend::run(*sockets, *args).await,
        Contract::Vllm(sockets, args) => {
            tracing::info!("vLLM's frontend contract: fronting vLLM's engines over vLLM's wire");
            vrs_server::lifecycle::vllm::frontend::run(sockets, *args).await
        }
    }
}

#[cfg(test)]
mod tests;
