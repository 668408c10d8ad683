//! Starting vLLM's headless engine for `serve --engine vllm`, as `vllm-rs serve` does:
//! `PY -m vllm.entrypoints.cli.main serve MODEL --headless --data-parallel-address A
//! --data-parallel-rpc-port P --data-parallel-size N [ENGINE ARGS]` with
//! `VLLM_USE_RUST_FRONTEND=1`, in its own process group, ended with vrs-rs.

use std::process::{Command, Stdio};

use vrs_engine_client::engines::Engines;
use vrs_engine_client::launcher::{self, EngineProcess};
use vrs_engine_client::EngineError;

use crate::args::engine::{VllmHandshake, VLLM_CLI_MODULE};
use crate::args::ServeArgs;

/// Checks that `python` runs and has vllm importable (without importing it: that takes
/// seconds), so that a wrong interpreter is one clear error, not an engine that dies.
pub fn check_python(python: &str) -> Result<(), EngineError> {
    let probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('vllm') is None)";
    let status = Command::new(python)
        .args(["-c", probe])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .map_err(|e| EngineError::Spawn(format!("{python} (--vllm-python)"), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(EngineError::Setup(format!(
            "{python} cannot import vllm ({status}); name the interpreter where vllm 0.33 is \
             installed with --vllm-python (e.g. ~/.cache/vrs-vllm-venv/bin/python)"
        )))
    }
}

/// Starts vLLM's headless engine(s) against `handshake`. Must run on the main thread
/// (the child's parent-death signal fires when the spawning thread exits).
pub fn spawn(args: &ServeArgs, handshake: &VllmHandshake) -> Result<Engines, EngineError> {
    if !args.vllm_engine_replaced() {
        check_python(args.vllm_python())?;
    }
    let argv = args.vllm_engine_argv(handshake);
    let (program, rest) = argv
        .split_first()
        .ok_or_else(|| EngineError::Setup("the vLLM engine command is empty".into()))?;
    let mut command = Command::new(program);
    command
        .args(rest)
        .env("VLLM_USE_RUST_FRONTEND", "1")
        .stdin(Stdio::null());
    launcher::own_process_group(&mut command);
    let shown = if args.vllm_engine_replaced() {
        program.clone()
    } else {
        format!("{program} -m {VLLM_CLI_MODULE} serve")
    };
    let child = command
        .spawn()
        .map_err(|e| EngineError::Spawn(shown.clone(), e))?;
    let process = EngineProcess::supervise(child)?;
    tracing::info!(
        pid = process.pid(),
        "started vLLM's engine: {}",
        redacted(&argv).join(" ")
    );
    Ok(Engines::Spawned(vec![process]))
}

/// `argv` for the log: the value after a `--*token*` / `--*key*` flag (and in
/// `--flag=value`) replaced by `***`.
pub fn redacted(argv: &[String]) -> Vec<String> {
    let secret =
        |flag: &str| flag.starts_with("--") && (flag.contains("token") || flag.contains("key"));
    let mut out = Vec::with_capacity(argv.len());
    let mut hide = false;
    for arg in argv {
        if std::mem::take(&mut hide) && !arg.starts_with("--") {
            out.push("***".to_owned());
            continue;
        }
        match arg.split_once('=') {
            Some((flag, _)) if secret(flag) => out.push(format!("{flag}=***")),
            _ => {
                hide = secret(arg);
                out.push(arg.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_engine_args_are_hidden_in_the_log() {
        let argv: Vec<String> = ["py", "--hf-token", "hf_x", "--api-key=k", "--dtype", "half"]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(
            redacted(&argv).join(" "),
            "py --hf-token *** --api-key=*** --dtype half"
        );
    }

    #[test]
    fn an_interpreter_without_vllm_is_one_clear_error() {
        let err = check_python("/bin/false").unwrap_err().to_string();
        assert!(
            err.contains("cannot import vllm") && err.contains("--vllm-python"),
            "{err}"
        );
        let err = check_python("/no/such/python").unwrap_err().to_string();
        assert!(err.contains("/no/such/python"), "{err}");
    }
}
