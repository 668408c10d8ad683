//! Turning a [`Generation`] into an HTTP response: SSE chunks or one JSON body. The
//! endpoint-specific shapes come from a [`Format`].

use std::convert::Infallible;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::error::ApiError;
use crate::openai::Usage;
use crate::sse;
use crate::stream::{Generation, Piece};

/// The endpoint's response shapes.
pub trait Format: Send + 'static {
    /// Events sent before any text (chat: the assistant role).
    fn start(&self, buf: &mut Vec<u8>);
    /// One text delta event, with the finish reason on the last.
    fn delta(&self, buf: &mut Vec<u8>, text: &str, finish: Option<&str>);
    /// The `include_usage` event: no choices, the usage.
    fn usage(&self, buf: &mut Vec<u8>, usage: Usage);
    /// The whole non-streamed response body.
    fn complete(&self, text: &str, finish: &str, usage: Usage) -> Vec<u8>;
}

struct Streaming<F> {
    generation: Generation,
    format: F,
    include_usage: bool,
    started: bool,
    done: bool,
}

/// The SSE response: start events, deltas, usage (when asked), `[DONE]`; a failure
/// becomes an error event followed by `[DONE]`.
pub fn stream<F: Format>(generation: Generation, format: F, include_usage: bool) -> Response {
    let state = Streaming {
        generation,
        format,
        include_usage,
        started: false,
        done: false,
    };
    let body = futures_util::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let mut buf = Vec::with_capacity(512);
        if !st.started {
            st.started = true;
            st.format.start(&mut buf);
            if !buf.is_empty() {
                return Some((Ok::<_, Infallible>(Bytes::from(buf)), st));
            }
        }
        match st.generation.next().await {
            Some(Piece::Text(text)) => st.format.delta(&mut buf, &text, None),
            Some(Piece::Finished { text, reason }) => {
                st.format.delta(&mut buf, &text, Some(reason));
                if st.include_usage {
                    st.format.usage(&mut buf, st.generation.usage());
                }
                buf.extend_from_slice(sse::DONE);
                st.done = true;
            }
            Some(Piece::Failed(err)) => {
                st.done = true;
                return Some((Ok(sse::error_event(&err)), st));
            }
            None => {
                buf.extend_from_slice(sse::DONE);
                st.done = true;
            }
        }
        Some((Ok(Bytes::from(buf)), st))
    });
    sse::response(Body::from_stream(body))
}

/// The non-streamed response: waits for the end, then one JSON body.
pub async fn complete<F: Format>(mut generation: Generation, format: F) -> Response {
    let mut all = String::new();
    loop {
        match generation.next().await {
            Some(Piece::Text(text)) => all.push_str(&text),
            Some(Piece::Finished { text, reason }) => {
                all.push_str(&text);
                let body = format.complete(&all, reason, generation.usage());
                return ([(header::CONTENT_TYPE, "application/json")], body).into_response();
            }
            Some(Piece::Failed(err)) => return err.into_response(),
            None => {
                return ApiError::Internal("the generation ended without a finish reason".into())
                    .into_response()
            }
        }
    }
}
