//! Whose engine `serve` fronts (`engine`: vrs's, or vLLM's over its engine-core wire), and
//! for vLLM's the command that starts its headless engine, as `vllm-rs serve` runs it.

use super::{ServeArgs, ServeSpecific, DEFAULT_PYTHON};

/// The engine behind the frontend, and so the engine wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// vrs's own engine (`python -m engine --headless`) and wire: the default.
    Vrs,
    /// vLLM 0.33's engine-core processes (`vllm serve --headless`, or `vllm serve`'s own).
    Vllm,
}

/// The values `engine` takes; the first is the default.
pub const ENGINES: [&str; 2] = ["vrs", "vllm"];

/// The module vLLM's CLI runs as (`python -m vllm.entrypoints.cli.main serve ...`).
pub const VLLM_CLI_MODULE: &str = "vllm.entrypoints.cli.main";

/// Checks `engine` and that the vLLM-only keys come with `engine: "vllm"`.
pub fn check(own: &ServeSpecific) -> Result<(), String> {
    let kind = kind_of(own.engine.as_deref())?;
    if kind != EngineKind::Vllm {
        for (key, given) in [
            ("vllm_python", own.vllm_python.is_some()),
            ("vllm_engine_command", own.vllm_engine_command.is_some()),
            ("vllm_engine_args", own.vllm_engine_args.is_some()),
        ] {
            if given {
                return Err(format!(
                    "{key} applies to vLLM's engine only; add engine \"vllm\" (--engine vllm)"
                ));
            }
        }
    }
    if let Some(command) = &own.vllm_engine_command {
        if command.first().map_or(true, |program| program.is_empty()) {
            return Err("vllm_engine_command must name a program (got an empty command)".into());
        }
    }
    Ok(())
}

fn kind_of(engine: Option<&str>) -> Result<EngineKind, String> {
    match engine {
        None | Some("vrs") => Ok(EngineKind::Vrs),
        Some("vllm") => Ok(EngineKind::Vllm),
        Some(other) => Err(format!(
            "engine must be one of {}; got {other:?}",
            ENGINES.join(", ")
        )),
    }
}

/// Where a vLLM headless engine finds the frontend's handshake socket, and how many
/// engines start there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmHandshake {
    /// Host the handshake ROUTER listens on (`--data-parallel-address`).
    pub host: String,
    /// Its TCP port (`--data-parallel-rpc-port`).
    pub port: u16,
}

impl ServeArgs {
    /// Whose engine this `serve` fronts (checked, so never an unknown name).
    pub fn engine_kind(&self) -> EngineKind {
        kind_of(self.specific.engine.as_deref()).unwrap_or(EngineKind::Vrs)
    }

    /// The interpreter vLLM's headless engine runs under (default `python3`).
    pub fn vllm_python(&self) -> &str {
        self.specific
            .vllm_python
            .as_deref()
            .unwrap_or(DEFAULT_PYTHON)
    }

    /// Whether a stand-in replaces vLLM's own engine command (`vllm_engine_command`).
    pub fn vllm_engine_replaced(&self) -> bool {
        self.specific.vllm_engine_command.is_some()
    }

    /// The command line of vLLM's headless engines, as `vllm-rs serve` runs it:
    /// `PY -m vllm.entrypoints.cli.main serve MODEL --headless` (or
    /// `vllm_engine_command` instead), then `--data-parallel-address A
    /// --data-parallel-rpc-port P --data-parallel-size N`, `--data-parallel-size-local L`
    /// when only some engines start here, then `vllm_engine_args`.
    pub fn vllm_engine_argv(&self, handshake: &VllmHandshake) -> Vec<String> {
        let mut argv: Vec<String> = match &self.specific.vllm_engine_command {
            Some(command) => command.clone(),
            None => [
                self.vllm_python(),
                "-m",
                VLLM_CLI_MODULE,
                "serve",
                &self.model,
                "--headless",
            ]
            .map(str::to_owned)
            .to_vec(),
        };
        let size = self.data_parallel_size();
        let local = self.data_parallel_size_local();
        argv.extend([
            "--data-parallel-address".to_owned(),
            handshake.host.clone(),
            "--data-parallel-rpc-port".to_owned(),
            handshake.port.to_string(),
            "--data-parallel-size".to_owned(),
            size.to_string(),
        ]);
        if local != size {
            argv.extend(["--data-parallel-size-local".to_owned(), local.to_string()]);
        }
        argv.extend(self.specific.vllm_engine_args.iter().flatten().cloned());
        argv
    }
}
