//! Who owns the engine processes, and starting `serve`'s local ones (a child of
//! `lifecycle`).

use std::time::Duration;

use crate::args::ServeArgs;
use crate::launcher::{self, EngineProcess, LaunchError};

use super::ENGINE_STOP_GRACE;

/// Who owns the engine processes.
pub enum Engines {
    /// `serve`: vrs-rs started the engines (engine i at position i) and stops them.
    Spawned(Vec<EngineProcess>),
    /// `frontend`: the parent started the engines and stops them; vrs-rs hears of a
    /// death through the engine client (a closed engine connection marks it dead).
    Supervised,
}

impl Engines {
    /// Resolves when a spawned engine exits: why, naming the engine.
    pub(super) async fn exited(&self) -> String {
        match self {
            Self::Spawned(processes) if !processes.is_empty() => {
                let exits = processes.iter().map(|p| Box::pin(p.exited()));
                let (status, i, _) = futures_util::future::select_all(exits).await;
                if processes.len() == 1 {
                    format!("the engine process exited unexpectedly ({status})")
                } else {
                    format!(
                        "engine {i} (pid {}) exited unexpectedly ({status})",
                        processes[i].pid()
                    )
                }
            }
            _ => std::future::pending().await,
        }
    }

    pub(super) async fn stop(&self, grace: Duration) {
        if let Self::Spawned(processes) = self {
            let stops = processes.iter().map(|p| p.stop(grace));
            for (i, status) in futures_util::future::join_all(stops)
                .await
                .into_iter()
                .enumerate()
            {
                match status {
                    Some(status) => tracing::info!("engine {i} stopped ({status})"),
                    None => tracing::warn!("engine {i} did not report its exit"),
                }
            }
        }
    }
}

/// Spawns engines `0..data_parallel_size_local` (on the main thread: see
/// `spawn_engine`); on a failure the ones already started are stopped.
pub async fn spawn_local(
    args: &ServeArgs,
    handshake_address: &str,
) -> Result<Engines, LaunchError> {
    let mut processes = Vec::new();
    for index in 0..args.data_parallel_size_local() {
        // Spawned here, on the main thread (see `spawn_engine`).
        let spawned = launcher::spawn_engine(
            args.python_executable(),
            handshake_address,
            index,
            args.log_level(),
        )
        .and_then(|child| Ok(EngineProcess::supervise(child)?));
        match spawned {
            Ok(process) => {
                tracing::info!(
                    pid = process.pid(),
                    "started engine {index} process: {} -m engine --headless",
                    args.python_executable()
                );
                processes.push(process);
            }
            Err(e) => {
                Engines::Spawned(processes).stop(ENGINE_STOP_GRACE).await;
                return Err(e);
            }
        }
    }
    Ok(Engines::Spawned(processes))
}
