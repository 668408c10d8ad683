//! vLLM 0.33's engine-core wire: the messages vLLM's frontend and its engine processes
//! exchange over ZMQ, as Rust types with a byte-exact codec.
//!
//! vLLM encodes with msgspec through `vllm.v1.serial_utils.MsgpackEncoder`:
//! * `array_like` msgspec structs (`EngineCoreRequest`, `EngineCoreOutput(s)`,
//!   `UtilityOutput`) are positional msgpack arrays of every field: msgspec ignores
//!   `omit_defaults` there (a shorter array still decodes, its tail taking defaults);
//! * other msgspec structs (`SamplingParams`, `EngineCoreEvent`) are maps with the
//!   default-valued fields left out; dataclasses (`StructuredOutputsParams`,
//!   `SchedulerStats`, handshake messages) are maps of every field; named tuples are
//!   arrays; sets are arrays; floats are always float64;
//! * numpy arrays and torch tensors are `[dtype, shape, data]` with the bytes inline as
//!   ext type 3 under 256 bytes, else in an extra ZMQ frame ([`array`]).
//!
//! Directions covered: the frontend's messages are encoded ([`encode_add`],
//! [`encode_abort`], [`encode_utility`], [`encode_handshake_metadata`]); the engine's are
//! decoded ([`decode_engine_message`], [`decode_handshake`], [`decode_ready_response`]).
//! `tests/vllm_compat.rs` proves both against fixtures written by vLLM's own encoder
//! (`tests/vllm_compat/make_fixtures.py`).

pub mod array;
pub mod handshake;
pub mod msgpack;
pub mod output;
pub mod request;
pub mod sampling;
pub mod stats;
pub mod structured;

pub use array::NdArray;
pub use handshake::{
    decode_handshake, decode_ready_response, encode_handshake_metadata, EngineCoreReadyResponse,
    EngineHandshakeMetadata, EngineZmqAddresses, HandshakeMessage, HandshakeStatus,
};
pub use msgpack::{Any, OrderedMap};
pub use output::{
    decode_engine_message, EngineCoreEvent, EngineCoreOutput, EngineCoreOutputs, EngineMessage,
    FinishReason, LogprobsLists, LogprobsTensors, StopReason, UtilityOutput, UtilityResult,
    ENGINE_CORE_DEAD,
};
pub use request::{
    encode_abort, encode_add, encode_utility, EngineCoreRequest, Frames, RequestType,
};
pub use sampling::{RepetitionDetectionParams, SamplingParams, StructuredOutputsParams};
pub use stats::{PrefixCacheStats, SchedulerStats};

/// What was wrong with a vLLM wire message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum VllmWireError {
    /// The bytes are not one well-formed msgpack value.
    #[error("malformed msgpack: {0}")]
    Msgpack(String),
    /// Bytes were left over after one complete message.
    #[error("{0} trailing byte(s) after the msgpack message")]
    TrailingBytes(usize),
    /// A multipart message had no frames.
    #[error("empty multipart message (no frames)")]
    NoFrames,
    /// A field held the wrong msgpack type or an out-of-range value.
    #[error("{at}: expected {expected}, found {found}")]
    Type {
        /// `Struct.field`.
        at: String,
        /// What vLLM 0.33 writes there.
        expected: &'static str,
        /// What was there.
        found: String,
    },
    /// An `array_like` struct had more fields than vLLM 0.33 defines (a newer vLLM?).
    #[error("{name}: array of {len} fields, vLLM 0.33 defines {max}: is the engine a newer vLLM?")]
    TooManyFields {
        /// The struct.
        name: &'static str,
        /// Fields received.
        len: usize,
        /// Fields defined.
        max: usize,
    },
    /// A required field was absent.
    #[error("{name}: missing required field {field}")]
    MissingField {
        /// The struct.
        name: &'static str,
        /// Which field.
        field: String,
    },
    /// An array's data refers to an aux frame that the message does not have.
    #[error("{at}: array data in frame {index}, but the message has {frames} frame(s)")]
    AuxFrame {
        /// `Struct.field`.
        at: String,
        /// The frame index given.
        index: i64,
        /// Frames in the message.
        frames: usize,
    },
    /// An array's dtype, shape and bytes do not agree, or its data form is unsupported.
    #[error("array: {0}")]
    Array(String),
    /// The first frame of an input-socket message is not a known request type.
    #[error("unknown request type frame {0:02x?} (vLLM uses one byte 0x00..=0x05)")]
    RequestTypeFrame(Vec<u8>),
}
