//! The HTTP layer's one error type, mapped to a status and the OpenAI error body here
//! and nowhere else.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use vrs_engine_client::EngineError;
use vrs_text::TextError;

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
    #[error("invalid or missing API key: send `Authorization: Bearer <key>`")]
    Unauthorized,
    /// Admission: this many generation requests are in flight already.
    #[error("the server is at its limit of {0} concurrent requests; retry later")]
    TooManyRequests(usize),
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
/// `payload_too_large` in `server/error.py`.
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
            Self::ModelNotFound(_) | Self::RouteNotFound(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::EngineDead(_) | Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::EngineError(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::BadRequest { .. } => "BadRequestError",
            Self::ModelNotFound(_) | Self::RouteNotFound(_) => "NotFoundError",
            Self::MethodNotAllowed { .. } => "MethodNotAllowedError",
            Self::PayloadTooLarge { .. } => "PayloadTooLargeError",
            Self::Unauthorized => "AuthenticationError",
            Self::TooManyRequests(_) => "TooManyRequestsError",
            Self::Timeout(_) => "TimeoutError",
            Self::EngineDead(_) | Self::Unavailable(_) => "ServiceUnavailableError",
            Self::EngineError(_) | Self::Internal(_) => "InternalServerError",
        }
    }

    fn param(&self) -> Option<&str> {
        match self {
            Self::BadRequest { param, .. } => param.as_deref(),
            Self::ModelNotFound(_) => Some("model"),
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
}

/// Seconds a client told 429 should wait (`Retry-After`).
pub const RETRY_AFTER_S: &str = "1";

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        use axum::http::header;
        let status = self.status();
        if status.is_server_error() {
            tracing::warn!(status = status.as_u16(), "{self}");
        } else {
            tracing::debug!(status = status.as_u16(), "{self}");
        }
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            self.to_json(),
        )
            .into_response();
        let headers = response.headers_mut();
        match self {
            Self::TooManyRequests(_) => {
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
/// reason; an engine that is gone (or never came up) → 503 "engine dead".
impl From<EngineError> for ApiError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::Shed(message) => Self::Unavailable(message),
            EngineError::Dead(message) => Self::EngineDead(message),
            other => Self::EngineDead(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn json(e: &ApiError) -> Value {
        serde_json::from_slice(&e.to_json()).unwrap()
    }

    #[test]
    fn each_variant_maps_to_status_type_and_param() {
        let cases = [
            (
                ApiError::bad("temperature", "bad temp"),
                400,
                "BadRequestError",
                Some("temperature"),
            ),
            (
                ApiError::bad_request("bad json"),
                400,
                "BadRequestError",
                None,
            ),
            (
                ApiError::ModelNotFound("x".into()),
                404,
                "NotFoundError",
                Some("model"),
            ),
            (
                ApiError::RouteNotFound("/nope".into()),
                404,
                "NotFoundError",
                None,
            ),
            (
                ApiError::MethodNotAllowed {
                    method: "GET".into(),
                    path: "/v1/completions".into(),
                },
                405,
                "MethodNotAllowedError",
                None,
            ),
            (
                ApiError::PayloadTooLarge {
                    limit: 10,
                    flag: None,
                },
                413,
                "PayloadTooLargeError",
                None,
            ),
            (
                ApiError::EngineDead("gone".into()),
                503,
                "ServiceUnavailableError",
                None,
            ),
            (ApiError::Unauthorized, 401, "AuthenticationError", None),
            (
                ApiError::TooManyRequests(4),
                429,
                "TooManyRequestsError",
                None,
            ),
            (ApiError::Timeout("2".into()), 504, "TimeoutError", None),
            (
                ApiError::Unavailable("shed".into()),
                503,
                "ServiceUnavailableError",
                None,
            ),
            (
                ApiError::EngineError("boom".into()),
                500,
                "InternalServerError",
                None,
            ),
            (
                ApiError::Internal("bug".into()),
                500,
                "InternalServerError",
                None,
            ),
        ];
        for (err, status, kind, param) in cases {
            assert_eq!(err.status().as_u16(), status, "{err:?}");
            let body = json(&err);
            assert_eq!(body["error"]["type"], kind);
            assert_eq!(body["error"]["code"], status);
            assert_eq!(body["error"]["message"], err.to_string());
            match param {
                Some(p) => assert_eq!(body["error"]["param"], p),
                None => assert!(body["error"]["param"].is_null()),
            }
        }
    }

    #[test]
    fn messages_name_the_problem() {
        assert_eq!(
            ApiError::ModelNotFound("gpt".into()).to_string(),
            "The model `gpt` does not exist."
        );
        assert_eq!(
            ApiError::bad("n", "`n` > 1 is not supported").to_string(),
            "`n` > 1 is not supported"
        );
    }

    #[test]
    fn too_large_names_the_limit_in_mib_and_the_flag() {
        let serving = ApiError::PayloadTooLarge {
            limit: 32 * 1024 * 1024,
            flag: Some("--max-request-body"),
        };
        assert_eq!(
            serving.to_string(),
            "request body is larger than the limit of 32 MiB (32 MiB = 33554432 bytes); \
             raise --max-request-body"
        );
        let render = ApiError::PayloadTooLarge {
            limit: 65536,
            flag: None,
        };
        assert_eq!(
            render.to_string(),
            "request body is larger than the limit of 0.0625 MiB (0.0625 MiB = 65536 bytes)"
        );
        assert_eq!(mib(1), "0.00000095367431640625");
        assert_eq!(mib(1000), "0.00095367431640625");
        assert_eq!(mib(3 * 1024 * 1024 + 512 * 1024), "3.5");
        assert_eq!(mib(0), "0");
    }

    #[tokio::test]
    async fn into_response_sets_status_and_json() {
        use http_body_util::BodyExt;
        let response = ApiError::bad("top_p", "top_p must be in (0, 1]").into_response();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST);
        assert_eq!(response.headers()["content-type"], "application/json");
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(body["error"]["param"], "top_p");
    }
}
