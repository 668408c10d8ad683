//! A request's side of the engine client (a child of `engine_client`): its output
//! queue, and the guard that aborts it in its engine when dropped early.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use vrs_wire::EngineCoreOutput;

use super::{EngineClient, EngineEvent};
use crate::error::EngineError;

/// One request's engine outputs, plus the guard that aborts it when dropped early.
pub struct RequestHandle {
    pub rx: mpsc::Receiver<EngineEvent>,
    overflow: Arc<AtomicBool>,
    limit: usize,
    guard: AbortGuard,
}

impl RequestHandle {
    /// The handle of request `id`, routed to engine slot `engine` of `client`.
    pub(super) fn new(
        rx: mpsc::Receiver<EngineEvent>,
        overflow: Arc<AtomicBool>,
        limit: usize,
        (client, id, engine): (Arc<EngineClient>, String, usize),
    ) -> Self {
        Self {
            rx,
            overflow,
            limit,
            guard: AbortGuard {
                client,
                id,
                engine,
                armed: true,
            },
        }
    }

    /// A handle on the same engine that holds `outputs` already (computed by the
    /// frontend, e.g. a beam search's sequences) and closes after them: no engine request
    /// of its own, so nothing to abort.
    pub fn replay(&self, id: String, outputs: Vec<EngineCoreOutput>) -> Self {
        let (tx, rx) = mpsc::channel(outputs.len().max(1));
        for output in outputs {
            // Never full (sized for them) nor closed (`rx` is here).
            let _ = tx.try_send(EngineEvent::Output(output));
        }
        Self {
            rx,
            overflow: Arc::new(AtomicBool::new(false)),
            limit: self.limit,
            guard: AbortGuard {
                client: Arc::clone(&self.guard.client),
                id,
                engine: self.guard.engine,
                armed: false,
            },
        }
    }

    pub fn request_id(&self) -> &str {
        &self.guard.id
    }

    /// The index of the engine the request was routed to (its `engine` metric label).
    pub fn engine_index(&self) -> u32 {
        self.guard.client.engine_index(self.guard.engine)
    }

    /// The next event; `None` once the queue is closed (see [`Self::closed_error`]).
    pub async fn recv(&mut self) -> Option<EngineEvent> {
        if self.overflow.load(Ordering::SeqCst) {
            return None;
        }
        self.rx.recv().await
    }

    /// An event already queued, if any.
    pub fn try_recv(&mut self) -> Option<EngineEvent> {
        if self.overflow.load(Ordering::SeqCst) {
            return None;
        }
        self.rx.try_recv().ok()
    }

    /// Why the queue closed without a finish: the consumer fell behind, or the engine.
    pub fn closed_error(&mut self) -> EngineError {
        if self.overflow.load(Ordering::SeqCst) {
            // The client reader removed the route; the engine was told to abort.
            self.guard.armed = false;
            return EngineError::Shed(format!(
                "request {} aborted: the client is not reading its response ({} engine \
                 outputs waiting)",
                self.guard.id, self.limit
            ));
        }
        let reason = self.guard.client.dead_reason();
        EngineError::Dead(
            reason.map_or_else(|| "the engine connection closed".into(), |r| r.to_string()),
        )
    }

    /// The engine finished the request by itself: nothing to abort on drop.
    pub fn finished(&mut self) {
        self.guard.armed = false;
    }

    /// Stops the engine's work on this request now.
    pub fn abort(&mut self) {
        if self.guard.armed {
            tracing::debug!(request_id = %self.guard.id, "aborting engine request");
            self.guard.armed = false;
            self.guard
                .client
                .abort(self.guard.engine, self.guard.id.clone());
        }
    }
}

/// Sends ABORT for its request unless disarmed: a client that disconnects, a stop
/// string that matched, or any early return stops the engine's work.
struct AbortGuard {
    client: Arc<EngineClient>,
    id: String,
    engine: usize,
    armed: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(request_id = %self.id, "aborting engine request");
            self.client.abort(self.engine, std::mem::take(&mut self.id));
        }
    }
}
