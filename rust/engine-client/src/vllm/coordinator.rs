//! vLLM's data-parallel coordinator, followed as vLLM's own frontend follows it
//! (`DPAsyncMPClient._ensure_stats_update_task` in vllm/v1/engine/core_client.py).
//!
//! With `data_parallel_size > 1` under `vllm serve`, vLLM's supervisor runs a
//! `DPCoordinator` and hands the frontend its stats publish address
//! (`--coordinator-address`). The frontend connects an XSUB socket there, subscribes
//! with `b"\x01"`, and reads msgpack `[counts | nil, wave, engines_running]` messages,
//! draining to the latest: `counts` has, per engine of the whole deployment,
//! `[waiting, running, ...]` (vLLM 0.33 appends the KV cache usage), sliced here to the
//! engines this frontend serves. Every ADD then carries the current wave
//! (`EngineCoreRequest.current_wave`): an engine that gets a request for a newer wave
//! than its own, or while the group is paused, has the coordinator wake the others.
//! The counts feed the client's least-loaded choice ([`crate::Wire::reported_load`]).
//!
//! One thread owns the socket; it polls a stop flag every 100 ms and ends when the
//! [`Coordinator`] is dropped.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmpv::Value;

use crate::error::EngineError;

/// How often the socket thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// What the coordinator last published, for the engines served here.
#[derive(Debug, Default)]
struct State {
    wave: AtomicI64,
    running: AtomicBool,
    /// `(running, waiting)` by engine, the first served engine first; empty until the
    /// coordinator published counts.
    counts: Mutex<Vec<(u64, u64)>>,
}

/// One coordinator publish.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// Per engine of the whole deployment: `(waiting, running)`; `None` when the
    /// publish carried no counts (a wave change only).
    pub counts: Option<Vec<(u64, u64)>>,
    pub wave: i64,
    pub engines_running: bool,
}

/// The subscription to vLLM's coordinator: its current wave and the served engines'
/// queue counts, kept current by a thread owning the XSUB socket.
pub struct Coordinator {
    state: Arc<State>,
    first: u32,
    stop: Arc<AtomicBool>,
}

impl Coordinator {
    /// Connects to the coordinator's stats publish address (`tcp://HOST:PORT` or
    /// `ipc://PATH`, as `--coordinator-address` gives it) and follows it for engines
    /// `first..first + count` of the deployment.
    pub fn connect(address: &str, first: u16, count: u16) -> Result<Self, EngineError> {
        let ctx = zmq::Context::new();
        let socket = ctx.socket(zmq::XSUB)?;
        socket.set_linger(0)?;
        socket.connect(address).map_err(|e| {
            EngineError::Setup(format!(
                "cannot connect to vLLM's data-parallel coordinator at {address} ({e}); \
                 pass the address vLLM's supervisor gave in --coordinator-address"
            ))
        })?;
        // XSUB subscriptions are messages: 0x01 followed by the (empty) topic.
        socket.send(&b"\x01"[..], 0)?;
        let state = Arc::new(State::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (s, flag) = (Arc::clone(&state), Arc::clone(&stop));
        let range = (usize::from(first), usize::from(count));
        std::thread::Builder::new()
            .name("vrs-vllm-coordinator".into())
            .spawn(move || follow(&socket, &s, &flag, range))?;
        tracing::info!("following vLLM's data-parallel coordinator at {address}");
        Ok(Self {
            state,
            first: u32::from(first),
            stop,
        })
    }

    /// The wave the coordinator last published (0 before its first publish).
    pub fn wave(&self) -> i64 {
        self.state.wave.load(Ordering::SeqCst)
    }

    /// Whether the coordinator last said the engines were running a wave.
    pub fn engines_running(&self) -> bool {
        self.state.running.load(Ordering::SeqCst)
    }

    /// `(running, waiting)` of engine `engine_index` (the deployment's numbering), as
    /// the coordinator last published; `None` before any counts or outside the range.
    pub fn load(&self, engine_index: u32) -> Option<(u64, u64)> {
        let slot = usize::try_from(engine_index.checked_sub(self.first)?).ok()?;
        let counts = self.state.counts.lock().unwrap_or_else(|p| p.into_inner());
        counts.get(slot).copied()
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// The socket thread: waits for publishes, drains to the latest, applies it.
fn follow(socket: &zmq::Socket, state: &State, stop: &AtomicBool, (first, count): (usize, usize)) {
    let mut warned = false;
    while !stop.load(Ordering::SeqCst) {
        match socket.poll(zmq::POLLIN, POLL.as_millis() as i64) {
            Ok(0) => continue,
            Ok(_) => {}
            Err(e) => {
                tracing::error!("vLLM coordinator subscription failed: {e}; waves stop here");
                return;
            }
        }
        let mut latest = None;
        while let Ok(message) = socket.recv_bytes(zmq::DONTWAIT) {
            latest = Some(message);
        }
        let Some(message) = latest else { continue };
        match decode_update(&message) {
            Ok(update) => apply(state, update, first, count),
            Err(e) if !warned => {
                warned = true;
                tracing::warn!("ignoring an undecodable vLLM coordinator publish: {e}");
            }
            Err(_) => {}
        }
    }
}

fn apply(state: &State, update: Update, first: usize, count: usize) {
    state.wave.store(update.wave, Ordering::SeqCst);
    state
        .running
        .store(update.engines_running, Ordering::SeqCst);
    if let Some(counts) = update.counts {
        let served: Vec<(u64, u64)> = counts
            .iter()
            .skip(first)
            .take(count)
            .map(|&(waiting, running)| (running, waiting))
            .collect();
        *state.counts.lock().unwrap_or_else(|p| p.into_inner()) = served;
    }
}

/// Decodes one publish: msgpack `[counts | nil, wave, engines_running]`, counts a list
/// of `[waiting, running, ...]` per engine.
pub fn decode_update(bytes: &[u8]) -> Result<Update, String> {
    let value = rmpv::decode::read_value(&mut &bytes[..]).map_err(|e| e.to_string())?;
    let items = match value {
        Value::Array(items) => items,
        other => return Err(format!("expected [counts, wave, running], got {other}")),
    };
    let [counts, wave, running] = <[Value; 3]>::try_from(items)
        .map_err(|items| format!("expected 3 items, got {}", items.len()))?;
    let counts = match counts {
        Value::Nil => None,
        Value::Array(engines) => Some(
            engines
                .iter()
                .map(engine_counts)
                .collect::<Result<Vec<_>, _>>()?,
        ),
        other => return Err(format!("counts: expected a list or nil, got {other}")),
    };
    let wave = wave
        .as_i64()
        .ok_or_else(|| format!("wave: expected an integer, got {wave}"))?;
    let engines_running = running
        .as_bool()
        .ok_or_else(|| format!("engines_running: expected a bool, got {running}"))?;
    Ok(Update {
        counts,
        wave,
        engines_running,
    })
}

/// `[waiting, running, ...]` of one engine as `(waiting, running)`.
fn engine_counts(value: &Value) -> Result<(u64, u64), String> {
    let number = |v: Option<&Value>| v.and_then(Value::as_u64);
    match value.as_array() {
        Some(items) => match (number(items.first()), number(items.get(1))) {
            (Some(waiting), Some(running)) => Ok((waiting, running)),
            _ => Err(format!(
                "engine counts: expected [waiting, running, ..], got {value}"
            )),
        },
        None => Err(format!("engine counts: expected a list, got {value}")),
    }
}
