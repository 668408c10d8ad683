//! The engine client's one error type: why the engines did not come up, or why one
//! request could not be served. Free of HTTP: the server maps it to a status.

use std::process::ExitStatus;

/// Everything the engine side can fail with: starting, connecting, or serving a request.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The engine is gone (or the server is shutting down after it died); the text says why.
    #[error("{0}")]
    Dead(String),
    /// One request was shed: its consumer stopped reading its outputs.
    #[error("{0}")]
    Shed(String),
    /// A request could not be written as msgpack (a bug, not the client's input).
    #[error("cannot encode the request for the engine: {0}")]
    Encode(String),
    /// The request asks for something the engine's wire cannot carry; the text names the
    /// field (the client's fault: a 400).
    #[error("{0}")]
    Unsupported(String),
    #[error("the engine sent no {stage} within {secs} s (raise VRS_ENGINE_READY_TIMEOUT_S for slow starts)")]
    Timeout { stage: &'static str, secs: f64 },
    #[error("the engine process exited ({status}) while vrs-rs waited for its {stage}")]
    Exited {
        stage: &'static str,
        status: ExitStatus,
    },
    #[error("the engine failed to start: {0}")]
    Failed(String),
    #[error("engine handshake protocol error: {0}")]
    Protocol(String),
    /// A start-up step failed; the text says which and why.
    #[error("{0}")]
    Setup(String),
    #[error("startup task failed: {0}")]
    Task(String),
    #[error("startup interrupted")]
    Cancelled,
    #[error("cannot start the engine ({0}): {1}")]
    Spawn(String, std::io::Error),
    #[error("engine socket error: {0}")]
    Zmq(#[from] zmq::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}
