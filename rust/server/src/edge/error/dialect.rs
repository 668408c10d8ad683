//! The error dialects: an [`ApiError`] answered as the OpenAI API does (every route but
//! Anthropic's) or as Anthropic's Messages API does (`/v1/messages*`), with that API's
//! status codes and body. Mirrors `Dialect` in `server/edge/error.py`.

use axum::http::StatusCode;
use serde::Serialize;

use super::ApiError;

/// Which API's error shape a route answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `{"error": {"message", "type", "param", "code"}}`.
    OpenAi,
    /// `{"type": "error", "error": {"type", "message"}}`, Anthropic's status codes.
    Anthropic,
}

impl Dialect {
    /// The dialect of the route at `path`: Anthropic's for `/v1/messages` and below.
    pub fn for_path(path: &str) -> Self {
        if path == "/v1/messages" || path.starts_with("/v1/messages/") {
            Self::Anthropic
        } else {
            Self::OpenAi
        }
    }

    /// The HTTP status of `err` in this dialect: Anthropic answers an unavailable
    /// server with 529 (overloaded), which its clients retry.
    pub fn status(self, err: &ApiError) -> StatusCode {
        let status = err.status();
        match self {
            Self::Anthropic if status == StatusCode::SERVICE_UNAVAILABLE => {
                StatusCode::from_u16(529).unwrap_or(status)
            }
            _ => status,
        }
    }
}

/// Anthropic's error type for an HTTP status (its documented table).
fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        code if code >= 500 => "api_error",
        _ => "invalid_request_error",
    }
}

#[derive(Serialize)]
struct AnthropicBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: AnthropicDetail<'a>,
}

#[derive(Serialize)]
struct AnthropicDetail<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'a str,
}

/// `{"type": "error", "error": {"type", "message"}}`; a 400 naming a field says which
/// (`param: message`), as Anthropic's validation errors do.
pub(super) fn anthropic_json(err: &ApiError) -> Vec<u8> {
    let message = match err {
        ApiError::BadRequest {
            message,
            param: Some(param),
        } if !message.starts_with(param.as_str()) => format!("{param}: {message}"),
        other => other.to_string(),
    };
    let body = AnthropicBody {
        kind: "error",
        error: AnthropicDetail {
            kind: anthropic_type(Dialect::Anthropic.status(err)),
            message: &message,
        },
    };
    // Strings only: serialization cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn anthropic(err: &ApiError) -> (u16, Value) {
        let status = Dialect::Anthropic.status(err).as_u16();
        (
            status,
            serde_json::from_slice(&anthropic_json(err)).unwrap(),
        )
    }

    #[test]
    fn paths_pick_their_dialect() {
        assert_eq!(Dialect::for_path("/v1/messages"), Dialect::Anthropic);
        assert_eq!(
            Dialect::for_path("/v1/messages/count_tokens"),
            Dialect::Anthropic
        );
        assert_eq!(Dialect::for_path("/v1/messagesx"), Dialect::OpenAi);
        assert_eq!(Dialect::for_path("/v1/responses"), Dialect::OpenAi);
        assert_eq!(Dialect::for_path("/v1/chat/completions"), Dialect::OpenAi);
    }

    #[test]
    fn anthropic_statuses_and_types() {
        let cases = [
            (ApiError::bad("max_tokens", "Field required"), 400, "invalid_request_error",
             "max_tokens: Field required"),
            (ApiError::bad_request("bad json"), 400, "invalid_request_error", "bad json"),
            (ApiError::Unauthorized, 401, "authentication_error",
             "invalid or missing API key: send `Authorization: Bearer <key>` or `x-api-key: <key>`"),
            (ApiError::ModelNotFound("m".into()), 404, "not_found_error",
             "The model `m` does not exist."),
            (ApiError::TooManyRequests(3), 429, "rate_limit_error",
             "the server is at its limit of 3 concurrent requests; retry later"),
            (ApiError::EngineDead("gone".into()), 529, "overloaded_error", "gone"),
            (ApiError::Timeout("2".into()), 504, "timeout_error",
             "the request did not finish within the server's request timeout of 2 s"),
            (ApiError::EngineError("boom".into()), 500, "api_error", "boom"),
        ];
        for (err, status, kind, message) in cases {
            let expected = json!({"type": "error", "error": {"type": kind, "message": message}});
            assert_eq!(anthropic(&err), (status, expected), "{err:?}");
        }
        assert_eq!(
            Dialect::OpenAi
                .status(&ApiError::EngineDead("x".into()))
                .as_u16(),
            503
        );
    }
}
