//! The HTTP client: keep-alive connection pool (hyper; https through [`connect`]),
//! request bodies ([`body`]), and one streamed request timed chunk by chunk (a pooling
//! request, answered in one body: [`pooling`]).

use std::error::Error as StdError;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use hyper::{Method, Request, Uri};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::args::Backend;
use crate::metrics::RequestRecord;
use crate::sse::SseParser;

mod body;
pub mod connect;
mod pooling;
mod stream;

pub use body::{chat_body, request_body};
use connect::Connector;
use stream::StreamState;

/// Bytes of an error response kept for the message.
const ERROR_BODY_LIMIT: usize = 8 * 1024;

/// The `anthropic-version` header the Messages backend sends (the API's current one).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A cheap-to-clone client sharing one connection pool, speaking one backend's API.
#[derive(Clone)]
pub struct HttpClient {
    inner: Client<Connector, Full<Bytes>>,
    /// No pool: a new connection for each request, for the one retry of a request whose
    /// pooled connection the server had closed ([`closed_before_answer`]).
    fresh: Client<Connector, Full<Bytes>>,
    backend: Backend,
    /// Sent with every request: the API key, and the API version where one is required.
    headers: Vec<(HeaderName, HeaderValue)>,
}

/// `error` and its sources on one line ("client error (Connect): ...: Connection refused").
pub fn describe(error: &(dyn StdError + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

/// Whether a request failed because its pooled connection was closed by the server before
/// any answer came (hyper: "connection closed before message completed", or a reset /
/// broken pipe while writing): the request may be sent again on a new connection. A
/// connect error, a timeout or a broken stream after the answer began is not such a case.
pub fn closed_before_answer(error: &(dyn StdError + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(inner) = source {
        if let Some(e) = inner.downcast_ref::<hyper::Error>() {
            if e.is_incomplete_message() || e.is_canceled() {
                return true;
            }
        }
        if let Some(e) = inner.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
            if matches!(e.kind(), BrokenPipe | ConnectionAborted | ConnectionReset) {
                return true;
            }
        }
        source = inner.source();
    }
    false
}

/// Parses an `http://` or `https://` URL.
pub fn parse_uri(url: &str) -> Result<Uri, String> {
    url.parse::<Uri>()
        .map_err(|e| format!("invalid URL {url:?}: {e}"))
}

/// The message of an error response body: OpenAI's or Anthropic's `error.message`, else
/// the text.
fn error_message(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let message = parsed.as_ref().and_then(|v| match &v["error"] {
        Value::Object(e) => e.get("message").and_then(Value::as_str).map(str::to_string),
        Value::String(s) => Some(s.clone()),
        _ => v.get("detail").map(|d| d.to_string()),
    });
    let text = message.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    let line = text.lines().next().unwrap_or("").to_string();
    if line.chars().count() > 300 {
        line.chars().take(300).collect::<String>() + "…"
    } else {
        line
    }
}

impl HttpClient {
    /// A client for the OpenAI completions backend.
    pub fn new() -> Self {
        Self::for_backend(Backend::OpenaiCompletions, None)
    }

    /// A client speaking `backend`'s API. The key is read as vLLM's bench does, from
    /// `OPENAI_API_KEY` (`Authorization: Bearer`); the Anthropic backend sends
    /// `ANTHROPIC_API_KEY` (else `OPENAI_API_KEY`) as `x-api-key`, with
    /// `anthropic-version`. `tls`: how https URLs are reached (see [`connect::tls_config`]);
    /// `None`: http only.
    pub fn for_backend(backend: Backend, tls: Option<Arc<rustls::ClientConfig>>) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_keepalive(Some(Duration::from_secs(60)));
        let inner = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(usize::MAX)
            .pool_idle_timeout(Duration::from_secs(90))
            .build(Connector::new(connector.clone(), tls.clone()));
        let fresh = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(0)
            .build(Connector::new(connector, tls));
        let key = |name: &str| std::env::var(name).ok().filter(|k| !k.is_empty());
        let mut headers = Vec::new();
        if backend == Backend::AnthropicMessages {
            let key = key("ANTHROPIC_API_KEY").or_else(|| key("OPENAI_API_KEY"));
            if let Some(value) = key.and_then(|k| HeaderValue::from_str(&k).ok()) {
                headers.push((HeaderName::from_static("x-api-key"), value));
            }
            headers.push((
                HeaderName::from_static("anthropic-version"),
                HeaderValue::from_static(ANTHROPIC_VERSION),
            ));
        } else if let Some(value) =
            key("OPENAI_API_KEY").and_then(|k| HeaderValue::from_str(&format!("Bearer {k}")).ok())
        {
            headers.push((AUTHORIZATION, value));
        }
        Self {
            inner,
            fresh,
            backend,
            headers,
        }
    }

    fn request(
        &self,
        method: Method,
        uri: &Uri,
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, String> {
        let mut builder = Request::builder().method(method).uri(uri.clone());
        for (name, value) in &self.headers {
            builder = builder.header(name, value.clone());
        }
        if !body.is_empty() {
            let accept = if self.backend.pooling() {
                "application/json"
            } else {
                "text/event-stream"
            };
            builder = builder
                .header(CONTENT_TYPE, "application/json")
                .header(ACCEPT, accept);
        }
        builder
            .body(Full::new(body))
            .map_err(|e| format!("cannot build a request to {uri}: {e}"))
    }

    /// `GET url` answered with JSON.
    pub async fn get_json(&self, url: &str) -> Result<Value, String> {
        let uri = parse_uri(url)?;
        let request = self.request(Method::GET, &uri, Bytes::new())?;
        let response = self
            .inner
            .request(request)
            .await
            .map_err(|e| format!("cannot reach {url}: {}", describe(&e)))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("GET {url}: {}", describe(&e)))?
            .to_bytes();
        if !status.is_success() {
            return Err(format!(
                "GET {url} returned HTTP {status}: {}",
                error_message(&body)
            ));
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {url} did not return JSON: {e}"))
    }

    /// Sends one request and times it (streamed, or one answer for a pooling backend).
    /// Never fails: a failure is a record with `success: false` and the reason.
    pub async fn send(&self, uri: &Uri, body: Bytes, prompt_len: usize) -> RequestRecord {
        if self.backend.pooling() {
            return self.send_pooling(uri, body, prompt_len).await;
        }
        self.send_streamed(uri, body, prompt_len, false).await.0
    }

    /// Sends one turn of a conversation (chat completions) and times it; also returns the
    /// answer's text, for the history of the next turn. The record's `prompt_len` is the
    /// server's `usage.prompt_tokens` when it reports one (else `prompt_len`), and its
    /// `cached_tokens` the server's `usage.prompt_tokens_details.cached_tokens`.
    pub async fn send_turn(
        &self,
        uri: &Uri,
        body: Bytes,
        prompt_len: usize,
    ) -> (RequestRecord, String) {
        let (mut record, answer) = self.send_streamed(uri, body, prompt_len, true).await;
        if let Some(answer) = &answer {
            if let Some(n) = answer.prompt_tokens {
                record.prompt_len = n as usize;
            }
            record.cached_tokens = answer.cached_tokens.map(|n| n as usize);
        }
        (record, answer.map(|a| a.text).unwrap_or_default())
    }

    async fn send_streamed(
        &self,
        uri: &Uri,
        body: Bytes,
        prompt_len: usize,
        keep_answer: bool,
    ) -> (RequestRecord, Option<stream::Answer>) {
        let mut state = StreamState::new(self.backend, Instant::now(), keep_answer);
        let end = match self.stream(uri, body, &mut state).await {
            Ok(end) => end,
            Err(message) => {
                state.failure = Some(message);
                Instant::now()
            }
        };
        let mut record = RequestRecord {
            prompt_len,
            retries: state.retries,
            ..Default::default()
        };
        // A stream that ends well without any text (one token that is half a character)
        // still succeeded, as in vLLM's bench: it needs a chunk with a choice.
        match (state.failure, state.first.or(state.first_choice)) {
            (Some(message), _) => record.error = Some(message),
            (None, None) => {
                record.error = Some(match self.backend {
                    Backend::OpenaiCompletions | Backend::OpenaiChat => format!(
                        "POST {uri}: the response carried no choices (is the endpoint a \
                         streaming OpenAI completions API?)"
                    ),
                    backend => format!(
                        "POST {uri}: the response carried no output events (is the endpoint \
                         a streaming {} API?)",
                        backend.api()
                    ),
                })
            }
            (None, Some(first)) => {
                record.success = true;
                record.ttft = (first - state.start).as_secs_f64();
                record.latency = (state.done.unwrap_or(end) - state.start).as_secs_f64();
                record.output_tokens = state.usage.map_or(state.chunks, |n| n as usize);
                record.itl = state.itl;
            }
        }
        (record, state.answer)
    }

    /// `POST body` answered with a success status: the answer's body. A pooled connection
    /// the server had closed is retried once (counted in `retries`); an error status is
    /// an error with the answer's message.
    async fn post(&self, uri: &Uri, body: Bytes, retries: &mut usize) -> Result<Incoming, String> {
        let request = self.request(Method::POST, uri, body.clone())?;
        let response = match self.inner.request(request).await {
            Ok(response) => response,
            // A kept-alive connection the server closed after its last answer (llama.cpp's
            // server does, though it says keep-alive): sent once more on a new connection,
            // as HTTP clients and the SDKs do; counted, never a failure of the server.
            Err(e) if closed_before_answer(&e) => {
                *retries += 1;
                let request = self.request(Method::POST, uri, body)?;
                self.fresh.request(request).await.map_err(|e| {
                    format!(
                        "POST {uri}: {} (sent again on a new connection)",
                        describe(&e)
                    )
                })?
            }
            Err(e) => return Err(format!("POST {uri}: {}", describe(&e))),
        };
        let status = response.status();
        let mut body = response.into_body();
        if !status.is_success() {
            let mut text = Vec::new();
            while let Some(Ok(frame)) = body.frame().await {
                if let Ok(data) = frame.into_data() {
                    text.extend_from_slice(&data[..data.len().min(ERROR_BODY_LIMIT - text.len())]);
                }
                if text.len() >= ERROR_BODY_LIMIT {
                    break;
                }
            }
            return Err(format!(
                "POST {uri} returned HTTP {status}: {}",
                error_message(&text)
            ));
        }
        Ok(body)
    }

    /// Reads the whole response (so the connection goes back to the pool); the time the
    /// stream ended when it was not `[DONE]`.
    async fn stream(
        &self,
        uri: &Uri,
        body: Bytes,
        state: &mut StreamState,
    ) -> Result<Instant, String> {
        let mut body = self.post(uri, body, &mut state.retries).await?;
        let mut parser = SseParser::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| format!("POST {uri}: stream broke: {}", describe(&e)))?;
            if let Ok(data) = frame.into_data() {
                let now = Instant::now();
                parser.feed(&data, &mut |payload| state.on_payload(payload, now));
            }
        }
        let end = Instant::now();
        parser.finish(&mut |payload| state.on_payload(payload, end));
        Ok(end)
    }
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests;
