//! The HTTP layer's one error type, mapped to a status and the OpenAI error body here
//! and nowhere else.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use vrs_engine_client::EngineError;
use vrs_text::TextError;

use crate::edge::metrics::Rejection;

mod dialect;
pub use dialect::Dialect;

/// Everything a request can fail with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ApiError {
    /// Bad input: malformed JSON, wrong types, bad values, unsupported fields.
    #[error("{message}")]
    BadRequest {
        message: String,
        param: Option<String>,
    },
    /// The request names a model this server does not serve.
    #[error("The model `{0}` does not exist.")]
    ModelNotFound(String),
    /// No route at this path.
    #[error("Not Found: {0}")]
    RouteNotFound(String),
    /// The thing the request names does not exist (the message says which and why;
    /// `param`: the field or path part that names it).
    #[error("{message}")]
    NotFound {
        message: String,
        param: Option<&'static str>,
    },
    /// The route exists, the method does not.
    #[error("Method Not Allowed: {method} {path}")]
    MethodNotAllowed { method: String, path: String },
    /// The body is over the size limit of `limit` bytes; `flag`: the option that
    /// raises it (`--max-request-body`), when the server has one.
    #[error("{}", too_large(*.limit, *.flag))]
    PayloadTooLarge {
        limit: usize,
        flag: Option<&'static str>,
    },
    /// The server has an API key and the request does not carry it.
    #[error(
        "invalid or missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`"
    )]
    Unauthorized,
    /// Admission: this many generation requests are in flight already.
    #[error("the server is at its limit of {0} concurrent requests; retry later")]
    TooManyRequests(usize),
    /// The queue in front of the engine is at a bound (`--max-num-queued-reqs` or
    /// `--max-num-queued-tokens`: `reason` says which).
    #[error("{message}")]
    QueueFull { reason: Rejection, message: String },
    /// The request waited in the queue past `--max-queue-wait` (seconds).
    #[error(
        "the request waited {0} s for the engine without starting (the server's \
         --max-queue-wait); retry later"
    )]
    QueueTimeout(String),
    /// The request ran past `--request-timeout` (seconds).
    #[error("the request did not finish within the server's request timeout of {0} s")]
    Timeout(String),
    /// The request was shed (e.g. its client stopped reading).
    #[error("{0}")]
    Unavailable(String),
    /// The engine is gone (or the server is shutting down after it died).
    #[error("{0}")]
    EngineDead(String),
    /// The engine failed this one request.
    #[error("{0}")]
    EngineError(String),
    /// Our own bug.
    #[error("{0}")]
    Internal(String),
}

/// The 413 message: the limit in MiB and in bytes, and the flag that raises it. Mirrors
/// `payload_too_large` in `server/edge/error.py`.
fn too_large(limit: usize, flag: Option<&str>) -> String {
    let size = mib(limit);
    let mut message =
        format!("request body is larger than the limit of {size} MiB ({size} MiB = {limit} bytes)");
    if let Some(flag) = flag {
        message.push_str(&format!("; raise {flag}"));
    }
    message
}

/// `bytes` in MiB, exactly (a whole number, or its finite binary fraction in decimal).
pub fn mib(bytes: usize) -> String {
    const MIB_BITS: u32 = 20;
    let bytes = bytes as u128;
    let whole = bytes >> MIB_BITS;
    let frac = bytes & ((1 << MIB_BITS) - 1);
    if frac == 0 {
        return whole.to_string();
    }
    // frac / 2^20 = frac * 5^20 / 10^20: twenty decimal digits, exactly.
    let digits = format!("{:020}", frac * 5u128.pow(MIB_BITS));
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// `{"error": {...}}`, the OpenAI error body.
#[derive(Debug, Serialize)]
pub struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

#[derive(Debug, Serialize)]
pub struct ErrorDetail<'a> {
    pub message: String,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub param: Option<&'a str>,
    pub code: u16,
}

impl ApiError {
    /// This error with a 400's `param` renamed by `rename` (how an API over the chat path
    /// names the chat request's fields); any other error unchanged.
    pub fn rename_param(self, rename: impl FnOnce(&str) -> String) -> ApiError {
        match self {
            ApiError::BadRequest {
                message,
                param: Some(param),
            } => ApiError::BadRequest {
                message,
                param: Some(rename(&param)),
            },
            other => other,
        }
    }

    /// A 400 naming the offending field.
    pub fn bad(param: impl Into<String>, message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            param: Some(param.into()),
        }
    }

    /// A 400 that concerns no single field.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::BadRequest {
            message: message.into(),
            param: None,
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            Self::BadRequest { .. } => StatusCode::BAD_REQUEST,
            Self::ModelNotFound(_) | Self::RouteNotFound(_) | Self::NotFound { .. } => {
                StatusCode::NOT_FOUND
            }
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::EngineDead(_)
            | Self::Unavailable(_)
            | Self::QueueFull { .. }
            | Self::QueueTimeout(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::EngineError(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "BadRequestError",
            Self::ModelNotFound(_) | Self::RouteNotFound(_) | Self::NotFound { .. } => {
                "NotFoundError"
            }
            Self::MethodNotAllowed { .. } => "MethodNotAllowedError",
            Self::PayloadTooLarge { .. } => "PayloadTooLargeError",
            Self::Unauthorized => "AuthenticationError",
            Self::TooManyRequests(_) => "TooManyRequestsError",
            Self::Timeout(_) => "TimeoutError",
            Self::EngineDead(_)
            | Self::Unavailable(_)
            | Self::QueueFull { .. }
            | Self::QueueTimeout(_) => "ServiceUnavailableError",
            Self::EngineError(_) | Self::Internal(_) => "InternalServerError",
        }
    }

    fn param(&self) -> Option<&str> {
        match self {
            Self::BadRequest { param, .. } => param.as_deref(),
            Self::ModelNotFound(_) => Some("model"),
            Self::NotFound { param, .. } => *param,
            _ => None,
        }
    }

    /// The JSON body of this error.
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: ErrorDetail {
                message: self.to_string(),
                kind: self.kind(),
                param: self.param(),
                code: self.status().as_u16(),
            },
        }
    }

    /// The body serialized (for an SSE error event as well as a response).
    pub fn to_json(&self) -> Vec<u8> {
        // An ErrorBody holds only strings and integers: serialization cannot fail.
        serde_json::to_vec(&self.body()).unwrap_or_default()
    }

    /// The `/metrics` reason this error refuses a request for, if it is an overload.
    pub fn rejection(&self) -> Option<Rejection> {
        match self {
            Self::TooManyRequests(_) => Some(Rejection::MaxConcurrentRequests),
            Self::QueueFull { reason, .. } => Some(*reason),
            Self::QueueTimeout(_) => Some(Rejection::QueueWaitTimeout),
            _ => None,
        }
    }
}

/// Seconds a client told 429 or a full queue's 503 should wait (`Retry-After`).
pub const RETRY_AFTER_S: &str = "1";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.respond(Dialect::OpenAi)
    }
}

impl ApiError {
    /// This error as a response in `dialect`'s status and body, with the headers its
    /// kind calls for (`Retry-After` on 429 and the queue's 503s, `WWW-Authenticate` on
    /// 401).
    pub fn respond(self, dialect: Dialect) -> Response {
        use axum::http::header;
        let status = dialect.status(&self);
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), "{self}");
        } else {
            tracing::debug!(status = status.as_u16(), "{self}");
        }
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            self.to_json_in(dialect),
        )
            .into_response();
        let headers = response.headers_mut();
        match self {
            Self::TooManyRequests(_) | Self::QueueFull { .. } | Self::QueueTimeout(_) => {
                headers.insert(
                    header::RETRY_AFTER,
                    header::HeaderValue::from_static(RETRY_AFTER_S),
                );
            }
            Self::Unauthorized => {
                headers.insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            _ => {}
        }
        response
    }

    /// The body of this error in `dialect` (for an SSE error event as well as a response).
    pub fn to_json_in(&self, dialect: Dialect) -> Vec<u8> {
        match dialect {
            Dialect::OpenAi => self.to_json(),
            Dialect::Anthropic => dialect::anthropic_json(self),
        }
    }
}

/// Maps a text-layer error: the user's input or template → 400, anything else → 500.
pub fn text_error(err: TextError) -> ApiError {
    if err.is_user_error() {
        ApiError::bad_request(err.to_string())
    } else {
        ApiError::Internal(err.to_string())
    }
}

/// The engine side's errors as the client sees them: a shed request → 503 with the
/// reason; an engine that is gone (or never came up) → 503 "engine dead"; a request
/// that cannot be encoded → 500; a setting the engine's wire cannot carry → 400.
impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Shed(message) => Self::Unavailable(message),
            EngineError::Encode(_) => Self::Internal(err.to_string()),
            EngineError::Unsupported(message) => Self::bad_request(message),
            EngineError::Dead(message) => Self::EngineDead(message),
            other => Self::EngineDead(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests;
