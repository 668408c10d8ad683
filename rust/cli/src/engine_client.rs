//! The frontend's side of the engine wire after the handshake.
//!
//! ZMQ sockets are not thread-safe, so each has one owner thread: the input thread owns
//! the input ROUTER and sends ADD/ABORT frames taken from a channel (aborts batched);
//! the output thread owns the output PULL, decodes `EngineOutputs` and hands each
//! `EngineCoreOutput` to its request's tokio channel. Engine death (the dead sentinel,
//! an undecodable message, a failed send, or the process exiting, reported by the
//! caller) ends every open request with [`EngineEvent::Dead`] and refuses new ones.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::{mpsc, Notify};
use vrs_wire::{
    AbortRequests, EngineCoreOutput, EngineCoreRequest, EngineOutputs, RequestType, SchedulerStats,
    ENGINE_DEAD_SENTINEL,
};

use crate::error::ApiError;

/// What a request's channel receives.
#[derive(Debug)]
pub enum EngineEvent {
    Output(EngineCoreOutput),
    /// The engine is gone; the text says why.
    Dead(Arc<str>),
}

enum Command {
    Add(EngineCoreRequest),
    Abort(String),
}

/// Most commands the input thread takes before it flushes the batched aborts.
const MAX_BATCH: usize = 512;

struct Shared {
    requests: DashMap<String, mpsc::UnboundedSender<EngineEvent>>,
    dead: AtomicBool,
    dead_reason: Mutex<Option<Arc<str>>>,
    died: Notify,
    stopping: AtomicBool,
    stats: Mutex<SchedulerStats>,
}

/// Handle to one engine: submit requests, observe its death and its scheduler stats.
pub struct EngineClient {
    shared: Arc<Shared>,
    commands: std_mpsc::Sender<Command>,
}

impl EngineClient {
    /// Takes over the sockets the handshake connected and starts the two owner threads.
    pub fn start(
        input: zmq::Socket,
        output: zmq::Socket,
        identity: Vec<u8>,
    ) -> std::io::Result<Arc<Self>> {
        let shared = Arc::new(Shared {
            requests: DashMap::new(),
            dead: AtomicBool::new(false),
            dead_reason: Mutex::new(None),
            died: Notify::new(),
            stopping: AtomicBool::new(false),
            stats: Mutex::new(SchedulerStats::default()),
        });
        let (commands, rx) = std_mpsc::channel();
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("vrs-engine-input".into())
            .spawn(move || input_loop(&input, &identity, &rx, &s))?;
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("vrs-engine-output".into())
            .spawn(move || output_loop(&output, &s))?;
        Ok(Arc::new(Self { shared, commands }))
    }

    /// Sends `request` to the engine; its outputs arrive on the returned handle.
    pub fn submit(self: &Arc<Self>, request: EngineCoreRequest) -> Result<RequestHandle, ApiError> {
        if let Some(reason) = self.dead_reason() {
            return Err(ApiError::EngineDead(reason.to_string()));
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let id = request.request_id.clone();
        self.shared.requests.insert(id.clone(), tx);
        // Re-check after inserting: `mark_dead` either saw this entry or we see its flag.
        if let Some(reason) = self.dead_reason() {
            self.shared.requests.remove(&id);
            return Err(ApiError::EngineDead(reason.to_string()));
        }
        if self.commands.send(Command::Add(request)).is_err() {
            self.shared.requests.remove(&id);
            return Err(ApiError::EngineDead(
                "the engine connection is closed".into(),
            ));
        }
        Ok(RequestHandle {
            rx,
            guard: AbortGuard {
                client: Arc::clone(self),
                id,
                armed: true,
            },
        })
    }

    /// Why the engine is dead, or `None` while it is alive.
    pub fn dead_reason(&self) -> Option<Arc<str>> {
        if !self.shared.dead.load(Ordering::SeqCst) {
            return None;
        }
        let reason = self
            .shared
            .dead_reason
            .lock()
            .map(|r| r.clone())
            .unwrap_or(None);
        Some(reason.unwrap_or_else(|| Arc::from("the engine is not running")))
    }

    /// Marks the engine dead and fails every open request with `reason`.
    pub fn mark_dead(&self, reason: impl Into<Arc<str>>) {
        self.shared.mark_dead(reason.into());
    }

    /// Resolves once the engine is dead, with the reason.
    pub async fn died(&self) -> Arc<str> {
        loop {
            let notified = self.shared.died.notified();
            if let Some(reason) = self.dead_reason() {
                return reason;
            }
            notified.await;
        }
    }

    /// From now on the engine stopping is expected (we are shutting it down).
    pub fn set_stopping(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
    }

    /// The latest scheduler stats the engine reported.
    pub fn stats(&self) -> SchedulerStats {
        self.shared
            .stats
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Requests waiting for engine output.
    pub fn in_flight(&self) -> usize {
        self.shared.requests.len()
    }

    fn abort(&self, id: String) {
        self.shared.requests.remove(&id);
        // A closed channel means the input thread is gone with the engine: nothing to stop.
        let _ = self.commands.send(Command::Abort(id));
    }
}

impl Shared {
    fn mark_dead(&self, reason: Arc<str>) {
        if self.dead.swap(true, Ordering::SeqCst) {
            return;
        }
        if self.stopping.load(Ordering::SeqCst) {
            tracing::debug!("engine stopped: {reason}");
        } else {
            tracing::error!("engine dead: {reason}");
        }
        if let Ok(mut slot) = self.dead_reason.lock() {
            *slot = Some(Arc::clone(&reason));
        }
        let ids: Vec<String> = self.requests.iter().map(|e| e.key().clone()).collect();
        for id in ids {
            if let Some((_, tx)) = self.requests.remove(&id) {
                let _ = tx.send(EngineEvent::Dead(Arc::clone(&reason)));
            }
        }
        self.died.notify_one();
    }

    fn dispatch(&self, outputs: EngineOutputs) {
        for output in outputs.outputs {
            if output.finish_reason.is_some() {
                if let Some((_, tx)) = self.requests.remove(&output.request_id) {
                    let _ = tx.send(EngineEvent::Output(output));
                }
            } else {
                let tx = self.requests.get(&output.request_id).map(|tx| tx.clone());
                if let Some(tx) = tx {
                    let _ = tx.send(EngineEvent::Output(output));
                }
            }
        }
        if let Some(stats) = outputs.scheduler_stats {
            if let Ok(mut slot) = self.stats.lock() {
                *slot = stats;
            }
        }
        if let Some(utility) = outputs.utility_output {
            tracing::warn!(
                call_id = utility.call_id,
                "unexpected utility output from the engine"
            );
        }
    }
}

/// One request's engine outputs, plus the guard that aborts it when dropped early.
pub struct RequestHandle {
    pub rx: mpsc::UnboundedReceiver<EngineEvent>,
    guard: AbortGuard,
}

impl RequestHandle {
    pub fn request_id(&self) -> &str {
        &self.guard.id
    }

    /// The engine finished the request by itself: nothing to abort on drop.
    pub fn finished(&mut self) {
        self.guard.armed = false;
    }

    /// Stops the engine's work on this request now.
    pub fn abort(&mut self) {
        if self.guard.armed {
            self.guard.armed = false;
            self.guard.client.abort(self.guard.id.clone());
        }
    }
}

/// Sends ABORT for its request unless disarmed: a client that disconnects, a stop
/// string that matched, or any early return stops the engine's work.
struct AbortGuard {
    client: Arc<EngineClient>,
    id: String,
    armed: bool,
}

impl Drop for AbortGuard {
    fn drop(&mut self) {
        if self.armed {
            tracing::debug!(request_id = %self.id, "aborting engine request");
            self.client.abort(std::mem::take(&mut self.id));
        }
    }
}

fn send_frames(
    socket: &zmq::Socket,
    identity: &[u8],
    kind: RequestType,
    body: Vec<u8>,
) -> zmq::Result<()> {
    socket.send(identity, zmq::SNDMORE)?;
    socket.send(&[kind.as_byte()][..], zmq::SNDMORE)?;
    socket.send(body, 0)
}

fn input_loop(
    socket: &zmq::Socket,
    identity: &[u8],
    rx: &std_mpsc::Receiver<Command>,
    shared: &Shared,
) {
    let mut aborts: Vec<String> = Vec::new();
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        let mut taken = 0;
        let mut result = Ok(());
        while let Some(command) = next.take() {
            match command {
                Command::Add(request) => match vrs_wire::encode(&request) {
                    Ok(body) => result = send_frames(socket, identity, RequestType::Add, body),
                    Err(e) => {
                        tracing::error!(request_id = %request.request_id, "cannot encode: {e}")
                    }
                },
                Command::Abort(id) => aborts.push(id),
            }
            if result.is_err() {
                break;
            }
            taken += 1;
            if taken < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        if result.is_ok() && !aborts.is_empty() {
            let message = AbortRequests {
                request_ids: std::mem::take(&mut aborts),
            };
            match vrs_wire::encode(&message) {
                Ok(body) => result = send_frames(socket, identity, RequestType::Abort, body),
                Err(e) => tracing::error!("cannot encode an abort: {e}"),
            }
        }
        if let Err(e) = result {
            shared.mark_dead(format!("cannot send to the engine: {e}").into());
            return;
        }
    }
}

fn output_loop(socket: &zmq::Socket, shared: &Shared) {
    let mut message = zmq::Message::new();
    loop {
        if let Err(e) = socket.recv(&mut message, 0) {
            shared.mark_dead(format!("engine output socket failed: {e}").into());
            return;
        }
        // Aux frames (none in protocol v1) would follow the first; drain them.
        let mut more = message.get_more();
        while more {
            let mut aux = zmq::Message::new();
            more = socket.recv(&mut aux, 0).is_ok() && aux.get_more();
        }
        if &message[..] == ENGINE_DEAD_SENTINEL {
            shared.mark_dead("the engine reported a fatal error and stopped".into());
            return;
        }
        match vrs_wire::decode::<EngineOutputs>(&message) {
            Ok(outputs) => shared.dispatch(outputs),
            Err(e) => {
                shared.mark_dead(format!("undecodable message from the engine: {e}").into());
                return;
            }
        }
    }
}

#[cfg(test)]
#[path = "engine_client_tests.rs"]
mod tests;
