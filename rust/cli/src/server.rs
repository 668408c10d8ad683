//! The HTTP server: shared state, routes and the HTTP listener. Startup order and
//! shutdown (signals, drain, engine death) are in `lifecycle`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use vrs_text::Tokenizer;

use crate::admission::Admission;
use crate::args::ServeArgs;
use crate::auth;
use crate::engine_client::EngineClient;
use crate::error::ApiError;
use crate::logprobs::TokenTexts;
use crate::metrics::{Histogram, Metrics};
use crate::openai::{ModelCard, ModelList};
use crate::prompt::TextModel;

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Everything a handler needs.
pub struct AppState {
    pub client: Arc<EngineClient>,
    pub tokenizer: Tokenizer,
    pub template: Option<crate::chat::Template>,
    pub model_name: Arc<str>,
    pub model_root: String,
    pub created: u64,
    pub max_model_len: u64,
    pub vocab_size: u64,
    pub options: HttpOptions,
    pub metrics: Arc<Metrics>,
    /// Generation requests in flight (`/load`), bounded by `--max-concurrent-requests`.
    pub admission: Arc<Admission>,
    pub token_texts: Arc<TokenTexts>,
}

/// The HTTP settings of a serving vrs-rs (from its args; the tool-call parser resolved
/// against the chat template).
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    pub api_key: Option<String>,
    pub max_request_body: usize,
    pub max_concurrent_requests: Option<usize>,
    pub request_timeout: Option<std::time::Duration>,
    pub tool_call_parser: Option<&'static str>,
    pub reasoning_parser: Option<String>,
}

impl HttpOptions {
    /// `template` is the chat template's source (for `--tool-call-parser auto`).
    pub fn from_args(args: &ServeArgs, template: Option<&str>) -> Result<Self, String> {
        Ok(Self {
            api_key: args.api_key(),
            max_request_body: args.max_request_body(),
            max_concurrent_requests: args.specific.max_concurrent_requests,
            request_timeout: args.request_timeout(),
            tool_call_parser: crate::tools::pick_parser(
                args.specific.tool_call_parser.as_deref(),
                template,
            )?,
            reasoning_parser: crate::reasoning::check_parser(
                args.specific.reasoning_parser.as_deref(),
            )?,
        })
    }
}

pub type SharedState = Arc<AppState>;

/// 404 unless `model` is absent or `served`.
pub fn check_model(served: &str, model: Option<&str>) -> Result<(), ApiError> {
    match model {
        Some(m) if m != served => Err(ApiError::ModelNotFound(m.to_owned())),
        _ => Ok(()),
    }
}

impl TextModel for AppState {
    fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn template(&self) -> Option<&crate::chat::Template> {
        self.template.as_ref()
    }

    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        check_model(&self.model_name, model)
    }

    fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    fn max_model_len(&self) -> u64 {
        self.max_model_len
    }

    fn tool_parser(&self) -> Option<&'static str> {
        self.options.tool_call_parser
    }

    fn tokenize_latency(&self) -> Option<&Histogram> {
        Some(&self.metrics.tokenize)
    }
}

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

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn router(state: SharedState) -> Router {
    let limit = state.options.max_request_body;
    Router::new()
        .route("/v1/chat/completions", post(crate::chat::handle))
        .route("/v1/completions", post(crate::completions::handle))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .route("/load", get(load))
        .route("/version", get(version))
        .route("/tokenize", post(crate::tokenize::tokenize))
        .route("/detokenize", post(crate::tokenize::detokenize))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), guard))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// Every request: the API key on `/v1/*` (401), then the route; counted in the metrics
/// by endpoint and status.
async fn guard(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let response = match &state.options.api_key {
        Some(key) if auth::protected(&path) && !auth::authorized(request.headers(), key) => {
            ApiError::Unauthorized.into_response()
        }
        _ => next.run(request).await,
    };
    state.metrics.request(&path, response.status().as_u16());
    response
}

async fn metrics(State(state): State<SharedState>) -> Response {
    let engines = state.client.engine_stats();
    let mut body = state.metrics.render(&engines, state.admission.active());
    let routed: Vec<(u32, usize)> = state
        .client
        .engine_loads()
        .into_iter()
        .map(|(index, _, routed)| (index, routed))
        .collect();
    crate::metrics::routed_metrics(&mut body, &routed);
    ([(header::CONTENT_TYPE, crate::metrics::CONTENT_TYPE)], body).into_response()
}

async fn load(State(state): State<SharedState>) -> Response {
    Json(serde_json::json!({"server_load": state.admission.active()})).into_response()
}

async fn version() -> Response {
    Json(serde_json::json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}

async fn models(State(state): State<SharedState>) -> Response {
    model_list(
        &state.model_name,
        state.created,
        &state.model_root,
        state.max_model_len,
    )
}

/// The `GET /v1/models` answer: the one served model.
pub fn model_list(name: &str, created: u64, root: &str, max_model_len: u64) -> Response {
    Json(ModelList {
        object: "list",
        data: [ModelCard {
            id: name,
            object: "model",
            created,
            owned_by: "vrs",
            root,
            parent: None,
            max_model_len,
        }],
    })
    .into_response()
}

async fn health(State(state): State<SharedState>) -> Response {
    match state.client.dead_reason() {
        None => StatusCode::OK.into_response(),
        Some(reason) => ApiError::EngineDead(reason.to_string()).into_response(),
    }
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::RouteNotFound(uri.path().to_owned())
}

pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

/// Runs `vrs-rs serve` to the end; returns the exit code.
pub async fn run(args: ServeArgs) -> u8 {
    crate::lifecycle::run_serve(args).await
}

/// Binds the HTTP listener with a deep accept backlog (connections made before the
/// engine is ready wait there).
pub async fn bind_http(host: &str, port: u16) -> anyhow::Result<tokio::net::TcpListener> {
    let addr: SocketAddr = tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve host {host:?}"))?;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket
        .bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot bind http://{addr}: {e}"))?;
    Ok(socket.listen(4096)?)
}

/// The task serving HTTP; it ends when the server stops.
pub type ServerTask = tokio::task::JoinHandle<std::io::Result<()>>;

/// Serves `app` on `listener` (TCP_NODELAY on every connection) in a task; sending on the
/// returned channel starts the graceful shutdown (no new connections, open ones finish).
pub fn spawn_http(
    listener: tokio::net::TcpListener,
    app: Router,
) -> (tokio::sync::oneshot::Sender<()>, ServerTask) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await
    });
    (stop_tx, server)
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
