//! Server-sent events framing: `data: {json}\n\n` … `data: [DONE]\n\n` (chat, completions),
//! or typed events `event: TYPE\ndata: {json}\n\n` (Responses, Anthropic Messages); and
//! the `: keep-alive` comment ([`keep_alive`], `--sse-keep-alive-interval`) that a
//! stream sends when it had nothing to send for that long (a request waiting in the
//! queue or prefilling), so that proxies do not cut it. SSE clients skip comments.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use futures_util::stream::{self, Stream, StreamExt};
use serde::Serialize;

use crate::edge::error::ApiError;

/// The closing event of every stream.
pub const DONE: &[u8] = b"data: [DONE]\n\n";

/// Appends one event holding `value` as JSON to `buf`.
pub fn push_event<T: Serialize>(buf: &mut Vec<u8>, value: &T) {
    buf.extend_from_slice(b"data: ");
    // Our chunk types hold only strings, numbers and options: this cannot fail, and if
    // it ever did the event would carry `null` rather than cut the stream.
    if serde_json::to_writer(&mut *buf, value).is_err() {
        buf.extend_from_slice(b"null");
    }
    buf.extend_from_slice(b"\n\n");
}

/// Appends one typed event, `event: kind` with `value` as its JSON data, to `buf`.
pub fn push_typed_event<T: Serialize>(buf: &mut Vec<u8>, kind: &str, value: &T) {
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(kind.as_bytes());
    buf.push(b'\n');
    push_event(buf, value);
}

/// The error event a failing stream ends with, followed by `[DONE]`.
pub fn error_event(err: &ApiError) -> Bytes {
    let mut buf = Vec::with_capacity(256);
    buf.extend_from_slice(b"data: ");
    buf.extend_from_slice(&err.to_json());
    buf.extend_from_slice(b"\n\n");
    buf.extend_from_slice(DONE);
    Bytes::from(buf)
}

/// The comment frame of [`keep_alive`].
pub const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";

/// `body`'s chunks, with a [`KEEP_ALIVE`] comment whenever it had none for `every`.
pub fn keep_alive<S>(body: S, every: Duration) -> impl Stream<Item = Result<Bytes, Infallible>>
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    // `next()` keeps its progress in the stream: a wait cut short by the timer loses
    // nothing (the body's pending step resumes at the next call).
    stream::unfold(Box::pin(body), move |mut body| async move {
        match tokio::time::timeout(every, body.next()).await {
            Ok(Some(chunk)) => Some((chunk, body)),
            Ok(None) => None,
            Err(_) => Some((Ok(Bytes::from_static(KEEP_ALIVE)), body)),
        }
    })
}

/// A `text/event-stream` response around `body`.
pub fn response(body: Body) -> Response {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_data_lines_with_a_blank_line() {
        let mut buf = Vec::new();
        push_event(&mut buf, &serde_json::json!({"a": "x\ny"}));
        assert_eq!(buf, b"data: {\"a\":\"x\\ny\"}\n\n");
        buf.clear();
        push_event(&mut buf, &1);
        push_event(&mut buf, &"two");
        assert_eq!(buf, b"data: 1\n\ndata: \"two\"\n\n");
    }

    #[test]
    fn typed_event_names_its_type() {
        let mut buf = Vec::new();
        push_typed_event(&mut buf, "ping", &serde_json::json!({"type": "ping"}));
        assert_eq!(buf, b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
    }

    #[test]
    fn error_event_then_done() {
        let e = error_event(&ApiError::EngineDead("engine died".into()));
        let text = std::str::from_utf8(&e).unwrap();
        let mut parts = text.split("\n\n");
        let first = parts.next().unwrap().strip_prefix("data: ").unwrap();
        let body: serde_json::Value = serde_json::from_str(first).unwrap();
        assert_eq!(body["error"]["code"], 503);
        assert_eq!(body["error"]["message"], "engine died");
        assert_eq!(parts.next(), Some("data: [DONE]"));
        assert!(text.ends_with("\n\n"));
    }

    proptest::proptest! {
        #[test]
        fn any_value_is_one_well_framed_event(
            text in proptest::prelude::any::<String>(),
            n in proptest::prelude::any::<i64>(),
            items in proptest::collection::vec(proptest::prelude::any::<String>(), 0..5),
        ) {
            let value = serde_json::json!({"text": text, "n": n, "items": items});
            let mut buf = b"data: [DONE]\n\n".to_vec();
            push_event(&mut buf, &value);
            let event = &buf[DONE.len()..];
            proptest::prop_assert!(event.starts_with(b"data: ") && event.ends_with(b"\n\n"));
            let body = &event[6..event.len() - 2];
            proptest::prop_assert!(!body.contains(&b'\n') && !body.contains(&b'\r'));
            let back: serde_json::Value = serde_json::from_slice(body).unwrap();
            proptest::prop_assert_eq!(back, value);
        }

        #[test]
        fn any_error_is_an_event_then_done(message in proptest::prelude::any::<String>()) {
            let bytes = error_event(&ApiError::EngineError(message.clone()));
            let text = std::str::from_utf8(&bytes).unwrap();
            let (event, done) = text.split_once("\n\n").unwrap();
            proptest::prop_assert_eq!(done, "data: [DONE]\n\n");
            let body: serde_json::Value =
                serde_json::from_str(event.strip_prefix("data: ").unwrap()).unwrap();
            proptest::prop_assert_eq!(body["error"]["message"].as_str(), Some(message.as_str()));
        }
    }

    #[tokio::test]
    async fn keep_alive_fills_silences_only() {
        let every = Duration::from_millis(100);
        // A chunk at once, one after a 350 ms silence, one right after it, then the end.
        let body = stream::iter([0u64, 350, 0]).then(|ms| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, Infallible>(Bytes::from(format!("data: {ms}\n\n")))
        });
        let chunks: Vec<String> = keep_alive(body, every)
            .map(|c| match c {
                Ok(bytes) => String::from_utf8(bytes.to_vec()).unwrap(),
                Err(never) => match never {},
            })
            .collect()
            .await;
        let n = chunks.len();
        assert!(n >= 4, "{chunks:?}");
        assert_eq!(chunks[0], "data: 0\n\n");
        assert!(
            chunks[1..n - 2].iter().all(|c| c.as_bytes() == KEEP_ALIVE),
            "{chunks:?}"
        );
        assert_eq!(chunks[n - 2..], ["data: 350\n\n", "data: 0\n\n"]);
    }

    #[test]
    fn response_headers() {
        let r = response(Body::empty());
        assert_eq!(r.headers()["content-type"], "text/event-stream");
        assert_eq!(r.headers()["cache-control"], "no-cache");
    }
}
