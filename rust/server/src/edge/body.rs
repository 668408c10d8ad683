//! Request bodies: the size limit, and read failures as our errors.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;

use crate::edge::error::ApiError;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The request body (`limit` bytes at most), with size and read failures as our errors.
pub fn request_body(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(limit),
        _ => ApiError::bad_request(format!(
            "cannot read the request body: {}",
            rejection.body_text()
        )),
    })
}

/// The request body, with size and read failures as our error bodies.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    request_body(body, MAX_BODY_BYTES)
}
