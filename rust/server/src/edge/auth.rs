//! The API key (`--api-key`, `VRS_API_KEY`): every `/v1/*` request and `/invocations`
//! (it generates; vLLM guards it too) must carry `Authorization: Bearer <key>` or, as
//! Anthropic's clients send it, `x-api-key: <key>`, compared in constant time; other routes (`/health`, `/ping`, `/metrics`, `/load`, …) stay open.
//! Mirrors `server/edge/auth.py`.

use axum::http::{header, HeaderMap};

/// Whether `path` needs the key.
pub fn protected(path: &str) -> bool {
    path.starts_with("/v1/") || path == "/invocations"
}

/// Whether `headers` carry `Authorization: Bearer <key>` or `x-api-key: <key>`.
pub fn authorized(headers: &HeaderMap, key: &str) -> bool {
    let given = |name: &str| headers.get(name).map(|v| v.as_bytes()).unwrap_or_default();
    let expected = format!("Bearer {key}");
    let bearer = constant_time_eq(given(header::AUTHORIZATION.as_str()), expected.as_bytes());
    let api_key = constant_time_eq(given("x-api-key"), key.as_bytes());
    bearer | api_key
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a
        .iter()
        .zip(b)
        .fold(0u8, |acc, (x, y)| std::hint::black_box(acc | (x ^ y)));
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn bearer_or_x_api_key() {
        let mut headers = HeaderMap::new();
        assert!(!authorized(&headers, "k1"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k1"));
        assert!(authorized(&headers, "k1"));
        assert!(!authorized(&headers, "k2"));
        assert!(!authorized(&headers, "k"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("k1"));
        assert!(!authorized(&headers, "k1"));
        headers.insert("x-api-key", HeaderValue::from_static("k1"));
        assert!(authorized(&headers, "k1"));
        assert!(!authorized(&headers, "k2"));
        headers.insert("x-api-key", HeaderValue::from_static("Bearer k1"));
        assert!(!authorized(&headers, "k1"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"ab", b"ac"));
        assert!(protected("/v1/models") && !protected("/health") && !protected("/v1"));
        assert!(protected("/invocations") && !protected("/ping"));
    }
}
