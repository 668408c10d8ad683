//! The frontend's side of the engine wire after the handshake, for one engine or a
//! data parallel group of them behind the same input ROUTER and output PULL.
//!
//! ZMQ sockets are not thread-safe, so each is used by one thread at a time: the input
//! ROUTER sits behind a mutex. `submit` sends its ADD straight from the caller's thread
//! (a tokio worker) when the mutex is free, so a request reaches the wire without a
//! thread hand-off; when the input thread holds it, the ADD goes through its channel
//! instead. The input thread sends those and the ABORTs (batched per engine). An ABORT
//! always follows its ADD: it is queued only after `submit` returned, by which time the
//! ADD is either on the socket or ahead of it in the channel. The output task owns the
//! output PULL, polled from the tokio runtime through its `ZMQ_FD` (no thread of its
//! own), decodes each message through the client's [`Wire`] (vrs's protocol or vLLM's)
//! and hands each `EngineCoreOutput` to its request's tokio channel, bounded: a request
//! whose consumer falls `VRS_MAX_PENDING_OUTPUTS` outputs behind (a client that stopped
//! reading) is aborted in the engine and fails. Engine death (the dead sentinel, an
//! undecodable message, a failed send, or the process exiting, reported by the caller)
//! ends every open request with [`EngineEvent::Dead`] and refuses new ones: with several
//! engines, any one dying takes the whole group down.
//! Each request goes to the least-loaded engine (see `balance`); its aborts follow it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};

use dashmap::DashMap;
use tokio::sync::{mpsc, Notify};
use vrs_wire::{EngineCoreOutput, EngineCoreRequest, EngineOutputs, SchedulerStats};

use crate::balance::{self, Load};
use crate::error::EngineError;
use crate::wire::Wire;

/// What a request's channel receives.
// Unboxed: every output is an `Output` (a box would be an allocation per output); `Dead`
// comes once.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum EngineEvent {
    Output(EngineCoreOutput),
    /// The engine is gone; the text says why.
    Dead(Arc<str>),
}

/// Commands for the input thread; the `usize` is the engine's slot.
enum Command {
    /// An encoded `EngineCoreRequest`: its frames after the identity.
    Add(usize, Vec<Vec<u8>>),
    Abort(usize, String),
}

/// Most commands the input thread takes before it flushes the batched aborts.
const MAX_BATCH: usize = 512;
/// Engine outputs one request may have waiting for its consumer by default.
pub const DEFAULT_MAX_PENDING: usize = 4096;

/// Engine outputs one request may have waiting for its consumer (a client that stops
/// reading): `VRS_MAX_PENDING_OUTPUTS`, default 4096. Beyond it the request is aborted.
pub fn max_pending_outputs() -> usize {
    std::env::var("VRS_MAX_PENDING_OUTPUTS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(DEFAULT_MAX_PENDING)
}

/// Where one request's outputs go.
struct Route {
    tx: mpsc::Sender<EngineEvent>,
    /// Set when the consumer fell `max_pending` outputs behind.
    overflow: Arc<AtomicBool>,
    /// The slot of the engine running it.
    engine: usize,
}

/// One engine of the group.
struct Slot {
    index: u32,
    identity: Vec<u8>,
    stats: Mutex<SchedulerStats>,
    /// Requests routed here that have not finished.
    in_flight: AtomicUsize,
    /// Requests routed here in all.
    routed: AtomicUsize,
}

struct Shared {
    requests: DashMap<String, Route>,
    max_pending: usize,
    dead: AtomicBool,
    dead_reason: Mutex<Option<Arc<str>>>,
    died: Notify,
    stopping: AtomicBool,
    engines: Vec<Slot>,
    turn: AtomicUsize,
    /// The engines' protocol.
    wire: Arc<dyn Wire>,
}

/// Handle to the engines: submit requests, observe a death and their scheduler stats.
pub struct EngineClient {
    shared: Arc<Shared>,
    commands: std_mpsc::Sender<Command>,
    /// The input ROUTER, shared with the input thread.
    input: Arc<Mutex<zmq::Socket>>,
}

impl EngineClient {
    /// Takes over the sockets the handshake connected: starts the input thread, and the
    /// output task on the current tokio runtime (an error outside one).
    /// `identities` are the engines' ROUTER identities (engine index, 2 bytes LE);
    /// `wire` is the engines' protocol ([`VrsWire`](crate::wire::VrsWire) for vrs's own).
    pub fn start(
        input: zmq::Socket,
        output: zmq::Socket,
        identities: Vec<Vec<u8>>,
        wire: Arc<dyn Wire>,
    ) -> std::io::Result<Arc<Self>> {
        if identities.is_empty() {
            return Err(std::io::Error::other("no engine to serve"));
        }
        let engines = identities
            .into_iter()
            .map(|identity| Slot {
                index: identity_index(&identity),
                identity,
                stats: Mutex::new(SchedulerStats::default()),
                in_flight: AtomicUsize::new(0),
                routed: AtomicUsize::new(0),
            })
            .collect();
        let shared = Arc::new(Shared {
            requests: DashMap::new(),
            max_pending: max_pending_outputs(),
            dead: AtomicBool::new(false),
            dead_reason: Mutex::new(None),
            died: Notify::new(),
            stopping: AtomicBool::new(false),
            engines,
            turn: AtomicUsize::new(0),
            wire,
        });
        let (commands, rx) = std_mpsc::channel();
        let s = Arc::clone(&shared);
        let input = Arc::new(Mutex::new(input));
        let socket = Arc::clone(&input);
        std::thread::Builder::new()
            .name("vrs-engine-input".into())
            .spawn(move || input_loop(&socket, &rx, &s))?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            std::io::Error::other("the engine client must be started on a tokio runtime")
        })?;
        runtime.spawn(output_task(output, Arc::clone(&shared), commands.clone()));
        Ok(Arc::new(Self {
            shared,
            commands,
            input,
        }))
    }

    /// Sends `request` to the engine; its outputs arrive on the returned handle.
    pub fn submit(
        self: &Arc<Self>,
        request: EngineCoreRequest,
    ) -> Result<RequestHandle, EngineError> {
        if let Some(reason) = self.dead_reason() {
            return Err(EngineError::Dead(reason.to_string()));
        }
        let (tx, rx) = mpsc::channel(self.shared.max_pending);
        let id = request.request_id.clone();
        let overflow = Arc::new(AtomicBool::new(false));
        let engine = self.shared.choose();
        let route = Route {
            tx,
            overflow: Arc::clone(&overflow),
            engine,
        };
        self.shared.insert(id.clone(), route);
        // Re-check after inserting: `mark_dead` either saw this entry or we see its flag.
        if let Some(reason) = self.dead_reason() {
            self.shared.remove(&id);
            return Err(EngineError::Dead(reason.to_string()));
        }
        let frames = match self.shared.wire.encode_add(&request) {
            Ok(frames) => frames,
            Err(e) => {
                self.shared.remove(&id);
                return Err(e);
            }
        };
        if let Err(e) = send_add(&self.input, &self.commands, &self.shared, engine, frames) {
            self.shared.remove(&id);
            return Err(e);
        }
        Ok(RequestHandle::new(
            rx,
            overflow,
            self.shared.max_pending,
            (Arc::clone(self), id, engine),
        ))
    }

    /// Why the engine is dead, or `None` while it is alive.
    pub fn dead_reason(&self) -> Option<Arc<str>> {
        if !self.shared.dead.load(Ordering::SeqCst) {
            return None;
        }
        let guard = self.shared.dead_reason.lock();
        let reason = guard.map(|r| r.clone()).unwrap_or(None);
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

    /// The index of the engine in slot `slot` (0 when there is no such slot).
    pub(crate) fn engine_index(&self, slot: usize) -> u32 {
        self.shared.engines.get(slot).map_or(0, |s| s.index)
    }

    /// Each engine's index and the latest scheduler stats it reported.
    pub fn engine_stats(&self) -> Vec<(u32, SchedulerStats)> {
        self.shared
            .engines
            .iter()
            .map(|slot| (slot.index, slot.stats()))
            .collect()
    }

    /// Each engine's index, its requests in flight and the requests routed to it in all.
    pub fn engine_loads(&self) -> Vec<(u32, usize, usize)> {
        self.shared
            .engines
            .iter()
            .map(|slot| {
                (
                    slot.index,
                    slot.in_flight.load(Ordering::SeqCst),
                    slot.routed.load(Ordering::SeqCst),
                )
            })
            .collect()
    }

    /// Requests waiting for engine output.
    pub fn in_flight(&self) -> usize {
        self.shared.requests.len()
    }

    fn abort(&self, engine: usize, id: String) {
        self.shared.remove(&id);
        // A closed channel means the input thread is gone with the engine: nothing to stop.
        let _ = self.commands.send(Command::Abort(engine, id));
    }
}

/// The engine index an identity names (2 bytes little-endian).
fn identity_index(identity: &[u8]) -> u32 {
    match identity {
        [lo, hi] => u32::from(u16::from_le_bytes([*lo, *hi])),
        _ => 0,
    }
}

impl Slot {
    fn stats(&self) -> SchedulerStats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Shared {
    /// The slot of the least-loaded engine.
    fn choose(&self) -> usize {
        if self.engines.len() == 1 {
            return 0;
        }
        let loads: Vec<Load> = self
            .engines
            .iter()
            .map(|slot| {
                let reported = self.wire.reported_load(slot.index);
                let (running, waiting) = reported.unwrap_or_else(|| {
                    let stats = slot.stats();
                    (stats.num_running, stats.num_waiting)
                });
                Load {
                    running,
                    waiting,
                    in_flight: slot.in_flight.load(Ordering::SeqCst),
                }
            })
            .collect();
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        balance::least_loaded(&loads, turn).unwrap_or(0)
    }

    fn insert(&self, id: String, route: Route) {
        let slot = &self.engines[route.engine];
        slot.in_flight.fetch_add(1, Ordering::SeqCst);
        slot.routed.fetch_add(1, Ordering::SeqCst);
        if let Some(old) = self.requests.insert(id, route) {
            self.engines[old.engine]
                .in_flight
                .fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Forgets a request (its engine's in-flight count follows).
    fn remove(&self, id: &str) -> Option<Route> {
        let (_, route) = self.requests.remove(id)?;
        self.engines[route.engine]
            .in_flight
            .fetch_sub(1, Ordering::SeqCst);
        Some(route)
    }

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
            if let Some(route) = self.remove(&id) {
                // A full queue: the consumer finds it closed and asks for the reason.
                let _ = route.tx.try_send(EngineEvent::Dead(Arc::clone(&reason)));
            }
        }
        self.died.notify_one();
    }

    /// Hands out `outputs`; returns the requests (engine slot, id) whose consumer fell
    /// too far behind (removed here, to be aborted in the engine).
    fn dispatch(&self, outputs: EngineOutputs) -> Vec<(usize, String)> {
        let mut overflowed = Vec::new();
        for output in outputs.outputs {
            if output.finish_reason.is_some() {
                // Removed before the finish is handed over: a consumer that has seen its
                // finish never finds its request still in flight.
                let Some(route) = self.remove(&output.request_id) else {
                    continue;
                };
                if let Err(mpsc::error::TrySendError::Full(EngineEvent::Output(output))) =
                    route.tx.try_send(EngineEvent::Output(output))
                {
                    route.overflow.store(true, Ordering::SeqCst);
                    tracing::warn!(request_id = %output.request_id, "the client stopped reading; dropped its finish");
                }
                continue;
            }
            // The id is only copied on the rare way out (a consumer that fell behind).
            let sent = match self.requests.get(&output.request_id) {
                Some(route) => route.tx.try_send(EngineEvent::Output(output)),
                None => continue,
            };
            if let Err(mpsc::error::TrySendError::Full(EngineEvent::Output(output))) = sent {
                let id = output.request_id;
                let engine = self.remove(&id).map(|route| {
                    route.overflow.store(true, Ordering::SeqCst);
                    route.engine
                });
                tracing::warn!(request_id = %id, "the client stopped reading; aborting");
                if let Some(engine) = engine {
                    overflowed.push((engine, id));
                }
            }
        }
        if let Some(stats) = outputs.scheduler_stats {
            let slot = self
                .engines
                .iter()
                .find(|slot| slot.index == outputs.engine_index);
            if let Some(Ok(mut current)) = slot.map(|slot| slot.stats.lock()) {
                *current = stats;
            }
        }
        if let Some(utility) = outputs.utility_output {
            tracing::warn!(
                call_id = utility.call_id,
                "unexpected utility output from the engine"
            );
        }
        overflowed
    }
}

mod handle;
pub use handle::RequestHandle;

mod io;
use io::{input_loop, output_task, send_add};

#[cfg(test)]
mod tests;
