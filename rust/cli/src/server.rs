//! The HTTP server: shared state, routes, startup order and shutdown.
//!
//! Startup: load the tokenizer and template, bind HTTP (connections wait in the kernel
//! backlog), bind the engine sockets, spawn the engine, handshake, then accept.
//! Shutdown: SIGINT/SIGTERM drain in-flight requests (bounded by `shutdown_timeout`)
//! then stop the engine group and exit 0; engine death fails open requests, stops
//! accepting and exits 1.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use tokio::signal::unix::{signal, SignalKind};
use vrs_text::Tokenizer;

use crate::args::ServeArgs;
use crate::engine_client::EngineClient;
use crate::error::ApiError;
use crate::launcher::{self, EngineProcess, LaunchError};
use crate::openai::{ModelCard, ModelList};

/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// How long the server keeps answering (503) after the engine died, so that clients
/// see why rather than a refused connection.
const DEATH_LINGER: Duration = Duration::from_secs(1);
/// How long streams get to end after that.
const DEATH_DRAIN: Duration = Duration::from_secs(3);
/// SIGTERM → SIGKILL grace for the engine group.
const ENGINE_STOP_GRACE: Duration = Duration::from_secs(5);

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
}

pub type SharedState = Arc<AppState>;

impl AppState {
    /// 404 unless `model` is absent or the served name.
    pub fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        match model {
            Some(m) if m != &*self.model_name => Err(ApiError::ModelNotFound(m.to_owned())),
            _ => Ok(()),
        }
    }
}

/// The request body, with size and read failures as our error bodies.
pub fn body_bytes(body: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    body.map_err(|rejection| match rejection.status() {
        StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge(MAX_BODY_BYTES),
        _ => ApiError::bad_request(format!(
            "cannot read the request body: {}",
            rejection.body_text()
        )),
    })
}

pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn router(state: SharedState) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(crate::chat::handle))
        .route("/v1/completions", post(crate::completions::handle))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn models(State(state): State<SharedState>) -> Response {
    Json(ModelList {
        object: "list",
        data: [ModelCard {
            id: &state.model_name,
            object: "model",
            created: state.created,
            owned_by: "vrs",
            root: &state.model_root,
            parent: None,
            max_model_len: state.max_model_len,
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

async fn not_found(uri: Uri) -> ApiError {
    ApiError::RouteNotFound(uri.path().to_owned())
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

/// Runs `vrs-rs serve` to the end; returns the exit code.
pub async fn run(args: ServeArgs) -> u8 {
    match serve(args).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            1
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;

    let model_dir = std::path::PathBuf::from(&args.model);
    let chat_template = args.chat_template.clone();
    let text = tokio::task::spawn_blocking(move || {
        crate::chat::load_text(&model_dir, chat_template.as_deref())
    });

    let listener = bind_http(args.host(), args.port()).await?;
    let local = listener.local_addr()?;

    let sockets = launcher::bind_sockets()?;
    // Spawned here, on the main thread (see `spawn_engine`).
    let child = launcher::spawn_engine(
        args.python_executable(),
        &sockets.handshake_address,
        args.log_level(),
    )?;
    let process = EngineProcess::supervise(child)?;
    tracing::info!(
        pid = process.pid(),
        "started engine process: {} -m engine --headless",
        args.python_executable()
    );

    let cancel = Arc::new(AtomicBool::new(false));
    let engine_config = launcher::json_to_msgpack(&serde_json::Value::Object(args.engine_config()));
    let exit = process.exit_receiver();
    let flag = Arc::clone(&cancel);
    let handshake = tokio::task::spawn_blocking(move || {
        launcher::handshake(
            sockets,
            exit,
            engine_config,
            launcher::ready_timeout(),
            &flag,
        )
    });
    // The tokenizer loads while the engine starts; either failing stops both at once.
    let text = async {
        text.await
            .map_err(|e| LaunchError::Task(e.to_string()))?
            .map_err(LaunchError::Text)
    };
    let engine = async {
        handshake
            .await
            .map_err(|e| LaunchError::Task(e.to_string()))?
    };
    let outcome = tokio::select! {
        both = async { tokio::try_join!(engine, text) } => {
            both.map(|((connected, dir), text)| (connected, dir, text))
        }
        _ = sigint.recv() => Err(LaunchError::Cancelled),
        _ = sigterm.recv() => Err(LaunchError::Cancelled),
    };
    let (connected, ipc_dir, (tokenizer, template)) = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            let cancelled = matches!(e, LaunchError::Cancelled);
            if cancelled {
                tracing::info!("interrupted during engine startup; stopping the engine");
            } else {
                tracing::error!("{e}");
            }
            process.stop(ENGINE_STOP_GRACE).await;
            return Ok(if cancelled { 0 } else { 1 });
        }
    };

    let ready = connected.ready.clone();
    let client = EngineClient::start(connected.input, connected.output, connected.identity)?;
    let state = Arc::new(AppState {
        client: Arc::clone(&client),
        tokenizer,
        template,
        model_name: Arc::from(args.served_model_name()),
        model_root: args.model.clone(),
        created: unix_now(),
        max_model_len: ready.max_model_len,
        vocab_size: ready.vocab_size,
    });
    tracing::info!(
        "model {:?} ({}); engine pid {}: {}, max_model_len {}, vocab {}{}",
        args.served_model_name(),
        args.model,
        process.pid(),
        if ready.is_mock {
            "mock engine"
        } else {
            "model engine"
        },
        ready.max_model_len,
        ready.vocab_size,
        if state.template.is_some() {
            ""
        } else {
            "; no chat template: /v1/chat/completions disabled"
        },
    );

    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let app = router(state);
    let mut server = tokio::spawn(async move {
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
    tracing::info!("listening on http://{local}");
    let stats = tokio::spawn(log_stats(Arc::clone(&client)));

    let code = tokio::select! {
        _ = sigint.recv() => drain(&client, &process, &mut server, stop_tx, args.shutdown_timeout(), "SIGINT", &mut sigint, &mut sigterm).await,
        _ = sigterm.recv() => drain(&client, &process, &mut server, stop_tx, args.shutdown_timeout(), "SIGTERM", &mut sigint, &mut sigterm).await,
        status = process.exited() => {
            client.mark_dead(format!("the engine process exited unexpectedly ({status})"));
            die(&client, &process, &mut server, stop_tx).await
        }
        _ = client.died() => die(&client, &process, &mut server, stop_tx).await,
        joined = &mut server => {
            tracing::error!("the HTTP server stopped: {joined:?}");
            client.set_stopping();
            process.stop(ENGINE_STOP_GRACE).await;
            1
        }
    };
    stats.abort();
    drop(ipc_dir);
    Ok(code)
}

type ServerTask = tokio::task::JoinHandle<std::io::Result<()>>;

#[allow(clippy::too_many_arguments)]
async fn drain(
    client: &EngineClient,
    process: &EngineProcess,
    server: &mut ServerTask,
    stop: tokio::sync::oneshot::Sender<()>,
    timeout: Duration,
    name: &str,
    sigint: &mut tokio::signal::unix::Signal,
    sigterm: &mut tokio::signal::unix::Signal,
) -> u8 {
    tracing::info!(
        "{name}: no longer accepting; draining {} in-flight request(s) for up to {timeout:?}",
        client.in_flight()
    );
    let _ = stop.send(());
    let mut code = 0;
    tokio::select! {
        joined = tokio::time::timeout(timeout, &mut *server) => {
            if joined.is_err() {
                tracing::warn!("shutdown timeout reached with {} request(s) unfinished", client.in_flight());
                cut_off(client, server).await;
            }
        }
        _ = sigint.recv() => {
            tracing::warn!("second signal: stopping now");
            cut_off(client, server).await;
        }
        _ = sigterm.recv() => {
            tracing::warn!("second signal: stopping now");
            cut_off(client, server).await;
        }
        status = process.exited() => {
            client.mark_dead(format!("the engine process exited unexpectedly ({status})"));
            let _ = tokio::time::timeout(DEATH_DRAIN, &mut *server).await;
            code = 1;
        }
    }
    client.set_stopping();
    match process.stop(ENGINE_STOP_GRACE).await {
        Some(status) => tracing::info!("engine stopped ({status})"),
        None => tracing::warn!("the engine did not report its exit"),
    }
    code
}

/// Ends unfinished requests with an error event (not a silent cut) and gives their
/// connections a moment to flush it.
async fn cut_off(client: &EngineClient, server: &mut ServerTask) {
    client.set_stopping();
    client.mark_dead("the server is shutting down");
    let _ = tokio::time::timeout(Duration::from_secs(1), &mut *server).await;
}

async fn die(
    client: &EngineClient,
    process: &EngineProcess,
    server: &mut ServerTask,
    stop: tokio::sync::oneshot::Sender<()>,
) -> u8 {
    tokio::time::sleep(DEATH_LINGER).await;
    let _ = stop.send(());
    if tokio::time::timeout(DEATH_DRAIN, &mut *server)
        .await
        .is_err()
    {
        tracing::warn!("connections still open {DEATH_DRAIN:?} after the engine died; exiting");
    }
    client.set_stopping();
    process.stop(Duration::from_secs(1)).await;
    tracing::error!("exiting because the engine is gone");
    1
}

/// Binds the HTTP listener with a deep accept backlog (connections made before the
/// engine is ready wait there).
async fn bind_http(host: &str, port: u16) -> anyhow::Result<tokio::net::TcpListener> {
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

/// Logs the engine's load every 10 s while there is any.
async fn log_stats(client: Arc<EngineClient>) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    tick.tick().await;
    let mut was_idle = true;
    loop {
        tick.tick().await;
        let stats = client.stats();
        let in_flight = client.in_flight();
        let idle = in_flight == 0 && stats.num_running == 0 && stats.num_waiting == 0;
        if !(idle && was_idle) {
            tracing::info!(
                "engine: {} running, {} waiting, KV cache {:.1}% used, {} preemptions; {in_flight} request(s) in flight",
                stats.num_running,
                stats.num_waiting,
                stats.kv_cache_usage * 100.0,
                stats.num_preemptions,
            );
        }
        was_idle = idle;
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
