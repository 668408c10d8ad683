//! Request bodies: the size limit, and read failures as our errors.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;

use crate::edge::error::ApiError;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// The flag that sets the serving API's body limit, named by its 413.
pub const LIMIT_FLAG: &str = "--max-request-body";

/// The request body (`limit` bytes at most, set by `--max-request-body`), with size and
/// read failures as our errors.
pub fn request_body(body: Result<Bytes, BytesRejection>, limit: usize) -> Result<Bytes, ApiError> {
    read(body, limit, Some(LIMIT_FLAG))
}

/// The render service's request body ([`MAX_BODY_BYTES`] at most; no flag sets it), with
/// size and read failures as our error bodies.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    read(body, MAX_BODY_BYTES, None)
}

fn read(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
    flag: Option<&'static str>,
) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge { limit, flag },
        _ => ApiError::bad_request(format!(
            "cannot read the request body: {}",
            rejection.body_text()
        )),
    })
}
