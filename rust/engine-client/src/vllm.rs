//! vLLM 0.33's engine-core processes behind the [`Wire`] seam.
//!
//! - [`VllmWire`]: vrs's requests as vLLM `EngineCoreRequest`s ([`request`]), vLLM's
//!   `EngineCoreOutputs` as vrs's `EngineOutputs` ([`output`]);
//! - [`handshake`]: the frontend-owned handshake (what `vllm serve --headless` engines
//!   and `vllm-mock-engine` expect): bind, HELLO → `EngineHandshakeMetadata` → READY,
//!   then each engine's `EngineCoreReadyResponse` on the input socket;
//! - [`supervised`]: the supervisor-owned start (`VLLM_USE_RUST_FRONTEND=1 vllm serve`):
//!   adopt the listeners vLLM bound and wait for the ready responses;
//! - [`ready`]: a ready response as vrs's [`vrs_wire::Ready`];
//! - [`coordinator`]: vLLM's data-parallel coordinator (`--coordinator-address`), whose
//!   wave every ADD carries and whose queue counts steer the least-loaded choice.

use std::collections::HashMap;
use std::sync::Mutex;

use vrs_wire::vllm::{self as v, EngineMessage};
use vrs_wire::EngineCoreRequest;

use crate::error::EngineError;
use crate::wire::{Decoded, Wire};

pub mod coordinator;
pub mod handshake;
pub mod output;
pub mod ready;
pub mod request;
pub mod supervised;

#[cfg(test)]
mod tests;

pub use coordinator::Coordinator;
pub use handshake::{bind_sockets, handshake, VllmGroup, VllmSockets};
pub use ready::{to_vrs_ready, ModelInfo};
pub use supervised::{listener_address, wait_ready};

/// vLLM 0.33's engine-core wire. It adds what vLLM's own frontend adds to every request
/// (the model's EOS ids), keeps the prefix-cache counters vLLM sends as deltas
/// cumulative, per engine, as vrs reports them, and times each request's decode from
/// its first token (vLLM's frontend does this itself; vrs's engines report it).
pub struct VllmWire {
    eos_token_ids: Vec<u32>,
    total_blocks: u64,
    totals: Mutex<HashMap<u32, output::Totals>>,
    /// Requests that have their first token: its step's timestamp (the engine's clock).
    first_token: Mutex<HashMap<String, f64>>,
    /// vLLM's data-parallel coordinator, when the engines run with one.
    coordinator: Option<Coordinator>,
}

impl VllmWire {
    /// A wire for engines whose model ends generation with `eos_token_ids` (the first is
    /// the primary EOS, as in `generation_config.json`) and that allocated
    /// `num_gpu_blocks` KV blocks each (from their ready responses).
    pub fn new(eos_token_ids: Vec<u32>, num_gpu_blocks: u64) -> Self {
        Self {
            eos_token_ids,
            total_blocks: num_gpu_blocks,
            totals: Mutex::new(HashMap::new()),
            first_token: Mutex::new(HashMap::new()),
            coordinator: None,
        }
    }

    /// The same wire stamping every ADD with `coordinator`'s current wave and taking
    /// the engines' queue counts from it.
    pub fn with_coordinator(mut self, coordinator: Coordinator) -> Self {
        self.coordinator = Some(coordinator);
        self
    }

    /// Sets `decode_time` on final outputs: from the step of the request's first token
    /// to `step` (`None` for a request that had no token).
    fn time_decodes(&self, step: f64, outputs: &mut [vrs_wire::EngineCoreOutput]) {
        let mut first = self.first_token.lock().unwrap_or_else(|p| p.into_inner());
        for o in outputs {
            let started = first.get(&o.request_id).copied();
            if o.finish_reason.is_some() {
                first.remove(&o.request_id);
                let start = started.or((!o.new_token_ids.is_empty()).then_some(step));
                o.decode_time = start.map(|t| (step - t).max(0.0));
            } else if started.is_none() && !o.new_token_ids.is_empty() {
                first.insert(o.request_id.clone(), step);
            }
        }
    }
}

impl Wire for VllmWire {
    fn encode_add(&self, request: &EngineCoreRequest) -> Result<Vec<Vec<u8>>, EngineError> {
        let mut request = request::to_vllm(request, &self.eos_token_ids)?;
        if let Some(coordinator) = &self.coordinator {
            request.current_wave = coordinator.wave();
        }
        Ok(v::encode_add(&request))
    }

    fn encode_abort(&self, ids: Vec<String>) -> Result<Vec<Vec<u8>>, EngineError> {
        // vLLM sends nothing more for a request its frontend aborted.
        let mut first = self.first_token.lock().unwrap_or_else(|p| p.into_inner());
        for id in &ids {
            first.remove(id);
        }
        drop(first);
        Ok(v::encode_abort(&ids))
    }

    fn reported_load(&self, engine_index: u32) -> Option<(u64, u64)> {
        self.coordinator.as_ref()?.load(engine_index)
    }

    fn decode(&self, frames: &[zmq::Message]) -> Result<Decoded, EngineError> {
        let views: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
        let message = v::decode_engine_message(&views).map_err(|e| {
            EngineError::Protocol(format!("undecodable message from the vLLM engine: {e}"))
        })?;
        match message {
            EngineMessage::EngineDead => Ok(Decoded::Dead),
            EngineMessage::Outputs(outputs) => {
                let step = outputs.timestamp;
                let mut totals = self.totals.lock().unwrap_or_else(|p| p.into_inner());
                let mut outputs = output::to_vrs(*outputs, self.total_blocks, &mut totals)?;
                drop(totals);
                self.time_decodes(step, &mut outputs.outputs);
                Ok(Decoded::Outputs(outputs))
            }
        }
    }
}
