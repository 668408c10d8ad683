//! The seam between the [`EngineClient`](crate::EngineClient) and the bytes on the engine
//! sockets: a [`Wire`] turns vrs's requests into the frames an engine reads and the
//! frames it writes back into vrs's [`EngineOutputs`]. [`VrsWire`] is vrs's own engine
//! protocol; [`VllmWire`](crate::vllm::VllmWire) is vLLM 0.33's engine-core protocol.
//! Everything above the client keeps seeing vrs's types.

use vrs_wire::{
    AbortRequests, EngineCoreRequest, EngineOutputs, RequestType, ENGINE_DEAD_SENTINEL,
};

use crate::error::EngineError;

/// What one message from an engine's output socket says.
// Unboxed: every message but the last is `Outputs`.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Decoded {
    /// One step's outputs.
    Outputs(EngineOutputs),
    /// The engine-dead sentinel: the engine stopped after a fatal error.
    Dead,
}

/// One engine protocol: the frames after the ROUTER identity going in, the frames of
/// one output message coming out. Called from the submitting tokio worker, the input
/// thread and the output task, so it must be cheap and thread-safe.
pub trait Wire: Send + Sync + 'static {
    /// The frames of an ADD: request-type frame, message, aux frames. A setting this
    /// wire cannot carry is [`EngineError::Unsupported`] naming it.
    fn encode_add(&self, request: &EngineCoreRequest) -> Result<Vec<Vec<u8>>, EngineError>;

    /// The frames of an ABORT of `ids`.
    fn encode_abort(&self, ids: Vec<String>) -> Result<Vec<Vec<u8>>, EngineError>;

    /// Decodes one multipart message (`frames` has at least one frame).
    fn decode(&self, frames: &[zmq::Message]) -> Result<Decoded, EngineError>;

    /// `(running, waiting)` of engine `engine_index` as a source beside its outputs
    /// reports them (vLLM's data-parallel coordinator); `None` to use the scheduler
    /// stats in the engine's outputs.
    fn reported_load(&self, _engine_index: u32) -> Option<(u64, u64)> {
        None
    }
}

/// vrs's own engine protocol (`vrs_wire`): `[type byte, msgpack body]`, no aux frames.
#[derive(Debug, Clone, Copy, Default)]
pub struct VrsWire;

impl Wire for VrsWire {
    fn encode_add(&self, request: &EngineCoreRequest) -> Result<Vec<Vec<u8>>, EngineError> {
        let body = vrs_wire::encode(request).map_err(|e| EngineError::Encode(e.to_string()))?;
        Ok(vec![vec![RequestType::Add.as_byte()], body])
    }

    fn encode_abort(&self, ids: Vec<String>) -> Result<Vec<Vec<u8>>, EngineError> {
        let body = vrs_wire::encode(&AbortRequests { request_ids: ids })
            .map_err(|e| EngineError::Encode(e.to_string()))?;
        Ok(vec![vec![RequestType::Abort.as_byte()], body])
    }

    fn decode(&self, frames: &[zmq::Message]) -> Result<Decoded, EngineError> {
        let first = frames
            .first()
            .ok_or_else(|| EngineError::Protocol("an engine message with no frames".into()))?;
        if &first[..] == ENGINE_DEAD_SENTINEL {
            return Ok(Decoded::Dead);
        }
        vrs_wire::decode::<EngineOutputs>(first)
            .map(Decoded::Outputs)
            .map_err(|e| EngineError::Protocol(format!("undecodable message from the engine: {e}")))
    }
}
