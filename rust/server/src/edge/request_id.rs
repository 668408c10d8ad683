//! Request ids (`--enable-request-id-headers`). [`echo`] is the middleware; it makes the id
//! the request's [`current`] one while its handler runs, so that the response body's id, the
//! `accepted` log line and the engine request id ([`engine_id`], a fresh suffix on a client's
//! id) carry it. Mirrors `server/edge/request_id.py`. Behaviour: docs/api.md, "Request ids".

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;

/// The header, as vLLM names it.
pub const HEADER: HeaderName = HeaderName::from_static("x-request-id");
/// The longest client id used as given.
pub const MAX_LEN: usize = 128;

/// A request's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId {
    pub value: String,
    /// The client's `X-Request-Id` (not unique: clients may reuse one).
    pub from_client: bool,
}

tokio::task_local! {
    static CURRENT: RequestId;
}

/// A fresh id: 32 hex digits.
pub fn fresh() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whether a client's id is usable as given: 1 to [`MAX_LEN`] visible ASCII characters
/// (`!` to `~`).
pub fn valid(value: &[u8]) -> bool {
    (1..=MAX_LEN).contains(&value.len()) && value.iter().all(|b| (b'!'..=b'~').contains(b))
}

/// The id of a request with these headers: its `X-Request-Id` when [`valid`], else a
/// fresh one.
pub fn of(headers: &HeaderMap) -> RequestId {
    match headers.get(&HEADER).map(HeaderValue::as_bytes) {
        Some(given) if valid(given) => RequestId {
            // Visible ASCII: always UTF-8.
            value: String::from_utf8_lossy(given).into_owned(),
            from_client: true,
        },
        _ => RequestId {
            value: fresh(),
            from_client: false,
        },
    }
}

/// The id of the request being handled, when request ids are on.
pub fn current() -> Option<RequestId> {
    CURRENT.try_with(Clone::clone).ok()
}

/// The middleware: the request's id ([`of`]) is [`current`] while the request is
/// handled and comes back in the response's `X-Request-Id`.
pub async fn echo(request: Request, next: Next) -> Response {
    let id = of(request.headers());
    let value = HeaderValue::from_str(&id.value);
    let mut response = CURRENT.scope(id, next.run(request)).await;
    if let Ok(value) = value {
        response.headers_mut().insert(HEADER, value);
    }
    response
}

/// `(public id, engine request id)` of a request whose ids start with `prefix`: the public
/// id is `<prefix>-<id>` with the [`current`] id (a fresh one when request ids are off);
/// the engine's is the same when the id is fresh, and `<prefix>-<id>-<32 hex digits>`
/// when the client chose it (clients may reuse ids; engine ids must be unique).
pub fn engine_id(prefix: &str) -> (String, String) {
    match current() {
        Some(RequestId {
            value,
            from_client: true,
        }) => {
            let public = format!("{prefix}-{value}");
            let engine = format!("{public}-{}", fresh());
            (public, engine)
        }
        Some(RequestId { value, .. }) => {
            let public = format!("{prefix}-{value}");
            (public.clone(), public)
        }
        None => {
            let public = format!("{prefix}-{}", fresh());
            (public.clone(), public)
        }
    }
}

/// The public id `<prefix>-<id>` of the [`current`] request (fresh when request ids are
/// off): what the render service answers as `request_id`.
pub fn public_id(prefix: &str) -> String {
    match current() {
        Some(id) => format!("{prefix}-{}", id.value),
        None => format!("{prefix}-{}", fresh()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_ascii_up_to_128() {
        assert!(valid(b"a"));
        assert!(valid(b"req-42_x.y:z/~!"));
        assert!(valid("x".repeat(128).as_bytes()));
        assert!(!valid("x".repeat(129).as_bytes()));
        assert!(!valid(b""));
        assert!(!valid(b"has space"));
        assert!(!valid(b"tab\there"));
        assert!(!valid(b"del\x7f"));
        assert!(!valid("caf\u{e9}".as_bytes()));
    }

    #[test]
    fn client_id_or_fresh() {
        let mut headers = HeaderMap::new();
        let id = of(&headers);
        assert!(!id.from_client && id.value.len() == 32);
        assert!(id.value.bytes().all(|b| b.is_ascii_hexdigit()));
        headers.insert(&HEADER, HeaderValue::from_static("client-7"));
        assert_eq!(
            of(&headers),
            RequestId {
                value: "client-7".into(),
                from_client: true
            }
        );
        headers.insert(&HEADER, HeaderValue::from_str(&"y".repeat(129)).unwrap());
        let long = of(&headers);
        assert!(!long.from_client && long.value.len() == 32);
        headers.insert(&HEADER, HeaderValue::from_static("two words"));
        assert!(!of(&headers).from_client);
    }

    #[tokio::test]
    async fn a_reused_client_id_gets_unique_engine_ids() {
        let shared = RequestId {
            value: "same".into(),
            from_client: true,
        };
        let (a_public, a_engine) = CURRENT
            .scope(shared.clone(), async { engine_id("chatcmpl") })
            .await;
        let (b_public, b_engine) = CURRENT.scope(shared, async { engine_id("chatcmpl") }).await;
        assert_eq!(
            (a_public.as_str(), b_public.as_str()),
            ("chatcmpl-same", "chatcmpl-same")
        );
        assert_ne!(a_engine, b_engine);
        assert!(a_engine.starts_with("chatcmpl-same-") && a_engine.len() == 14 + 32);
        let fresh_id = RequestId {
            value: fresh(),
            from_client: false,
        };
        let (public, engine) = CURRENT
            .scope(fresh_id.clone(), async { engine_id("cmpl") })
            .await;
        assert_eq!(public, format!("cmpl-{}", fresh_id.value));
        assert_eq!(engine, public, "a fresh id is unique already");
        let (public, engine) = engine_id("cmpl");
        assert_eq!(public, engine);
        assert!(current().is_none() && public.len() == 5 + 32);
        let rendered = CURRENT
            .scope(fresh_id.clone(), async { public_id("chatcmpl") })
            .await;
        assert_eq!(rendered, format!("chatcmpl-{}", fresh_id.value));
    }
}
