//! `vrs-engine-client`: the frontend's side of the engine wire, free of HTTP.
//!
//! - [`launcher`]: bind the engine sockets, spawn `python -m engine --headless`, run the
//!   handshake (HELLO → INIT → READY/FAILED), stop the process group;
//! - [`adopt`]: take over listeners a parent process bound (`vrs-rs frontend`);
//! - [`scaleout`]: engines on other hosts over tcp://;
//! - [`client`]: the [`EngineClient`] after the handshake (one owner thread per ZMQ
//!   socket, a bounded queue per request, engine death fails every open request);
//! - [`balance`]: which engine of a data parallel group takes the next request;
//! - [`engines`]: who owns the engine processes;
//! - [`error`]: [`EngineError`], this crate's one error type;
//! - [`wire`]: the [`Wire`] seam: vrs's own engine protocol ([`VrsWire`]) or vLLM's
//!   ([`vllm::VllmWire`]);
//! - [`vllm`]: vLLM 0.33's engine-core processes: request/output mapping and the two
//!   handshakes (frontend-owned, supervisor-owned);
//! - `fake` (feature `test-util`): a fake engine speaking the real wire, for tests.

pub mod adopt;
pub mod balance;
pub mod client;
pub mod engines;
pub mod error;
#[cfg(any(test, feature = "test-util"))]
pub mod fake;
pub mod launcher;
pub mod scaleout;
pub mod vllm;
pub mod wire;

pub use client::{EngineClient, EngineEvent, RequestHandle};
pub use error::EngineError;
pub use wire::{Decoded, VrsWire, Wire};
