//! Who owns the engine processes, and starting `serve`'s local ones.

use std::time::Duration;

use crate::error::EngineError;
use crate::launcher::{self, EngineProcess};

/// How long a stopped engine gets between SIGTERM and SIGKILL.
pub const ENGINE_STOP_GRACE: Duration = Duration::from_secs(5);

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
    pub async fn exited(&self) -> String {
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

    pub async fn stop(&self, grace: Duration) {
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

/// Spawns engines `0..count` with `python -m engine --headless` (on the main thread: see
/// `spawn_engine`); on a failure the ones already started are stopped.
pub async fn spawn_local(
    python: &str,
    handshake_address: &str,
    count: u16,
    log_level: &str,
) -> Result<Engines, EngineError> {
    let mut processes = Vec::new();
    for index in 0..count {
        // Spawned here, on the main thread (see `spawn_engine`).
        let spawned = launcher::spawn_engine(python, handshake_address, index, log_level)
            .and_then(|child| Ok(EngineProcess::supervise(child)?));
        match spawned {
            Ok(process) => {
                tracing::info!(
                    pid = process.pid(),
                    "started engine {index} process: {} -m engine --headless",
                    python
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
