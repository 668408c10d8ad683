//! Startup order and shutdown of a serving vrs-rs (`serve` here, `frontend` in
//! `frontend.rs`; both end in [`serve_connected`]).
//!
//! `serve` startup: load the tokenizer and template, bind HTTP (connections wait in the
//! kernel backlog), bind the engine sockets, spawn the engine, handshake, then accept.
//! Shutdown: SIGINT/SIGTERM drain in-flight requests (bounded by `shutdown_timeout`)
//! then stop the engine group and exit 0; engine death fails open requests, stops
//! accepting and exits 1.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use vrs_text::Tokenizer;
use vrs_wire::Ready;

use crate::admission::Admission;
use crate::args::ServeArgs;
use crate::engine_client::EngineClient;
use crate::launcher::{self, EngineProcess, LaunchError};
use crate::logprobs::TokenTexts;
use crate::metrics::Metrics;
use crate::server::{bind_http, router, spawn_http, unix_now, AppState, HttpOptions, ServerTask};

/// How long the server keeps answering (503) after the engine died, so that clients
/// see why rather than a refused connection.
const DEATH_LINGER: Duration = Duration::from_secs(1);
/// How long streams get to end after that.
const DEATH_DRAIN: Duration = Duration::from_secs(3);
/// SIGTERM → SIGKILL grace for the engine group.
const ENGINE_STOP_GRACE: Duration = Duration::from_secs(5);

/// The tokenizer and the chat template (if the model has one).
pub type Text = (Tokenizer, Option<crate::chat::Template>);

/// SIGINT and SIGTERM, received as one stream.
pub struct Signals {
    int: Signal,
    term: Signal,
}

impl Signals {
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            int: signal(SignalKind::interrupt())?,
            term: signal(SignalKind::terminate())?,
        })
    }

    /// The name of the next signal received.
    pub async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
        }
    }
}

#[path = "lifecycle_engines.rs"]
mod engines;
pub use engines::Engines;

/// Runs `vrs-rs serve` to the end; returns the exit code.
pub async fn run_serve(args: ServeArgs) -> u8 {
    match serve(args).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            1
        }
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;

    let model_dir = std::path::PathBuf::from(&args.model);
    let chat_template = args.chat_template.clone();
    let text = tokio::task::spawn_blocking(move || {
        crate::chat::load_text(&model_dir, chat_template.as_deref())
    });

    let listener = bind_http(args.host(), args.port()).await?;

    let size = args.data_parallel_size();
    let (sockets, lost) = if args.data_parallel_size_local() < size {
        let (sockets, lost) = crate::scaleout::bind_tcp_sockets(
            args.data_parallel_address(),
            args.data_parallel_rpc_port(),
        )?;
        tracing::info!(
            "waiting for engines {}..{size} to join: vrs serve MODEL --headless \
             --handshake-address {} --engine-index I",
            args.data_parallel_size_local(),
            sockets.handshake_address
        );
        (sockets, Some(lost))
    } else {
        (launcher::bind_sockets()?, None)
    };
    let processes = engines::spawn_local(&args, &sockets.handshake_address).await?;

    let cancel = Arc::new(AtomicBool::new(false));
    let engine_config = launcher::json_to_msgpack(&serde_json::Value::Object(args.engine_config()));
    let exits = match &processes {
        Engines::Spawned(list) => list.iter().map(EngineProcess::exit_receiver).collect(),
        Engines::Supervised => Vec::new(),
    };
    let flag = Arc::clone(&cancel);
    let handshake = tokio::task::spawn_blocking(move || {
        launcher::handshake_group(
            sockets,
            usize::from(size),
            exits,
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
        _ = signals.recv() => Err(LaunchError::Cancelled),
    };
    let (connected, ipc_dir, text) = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            let cancelled = matches!(e, LaunchError::Cancelled);
            if cancelled {
                tracing::info!("interrupted during engine startup; stopping the engine");
            } else {
                tracing::error!("{e}");
            }
            processes.stop(ENGINE_STOP_GRACE).await;
            return Ok(if cancelled { 0 } else { 1 });
        }
    };
    let (identities, readies): (Vec<_>, Vec<_>) = connected.engines.into_iter().unzip();
    let ready = readies
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("no engine sent READY"))?;
    let client = EngineClient::start(connected.input, connected.output, identities)?;
    if let Some(mut lost) = lost {
        let watcher = Arc::clone(&client);
        tokio::spawn(async move {
            if let Some(reason) = lost.recv().await {
                watcher.mark_dead(format!("an engine left: {reason}"));
            }
        });
    }
    let code = serve_connected(
        &args,
        listener,
        client,
        &ready,
        text,
        processes,
        &mut signals,
    )
    .await;
    drop(ipc_dir);
    code
}

/// Serves HTTP on `listener` with the engine behind `client` until a signal (drain,
/// exit 0), the engine's death or the server failing (exit 1); returns the exit code.
pub async fn serve_connected(
    args: &ServeArgs,
    listener: tokio::net::TcpListener,
    client: Arc<EngineClient>,
    ready: &Ready,
    (tokenizer, template): Text,
    engines: Engines,
    signals: &mut Signals,
) -> anyhow::Result<u8> {
    let local = listener.local_addr()?;
    let source = crate::chat::template_source(&tokenizer, args.chat_template.as_deref());
    let options = HttpOptions::from_args(args, source.as_deref()).map_err(anyhow::Error::msg)?;
    tracing::info!(
        "tool-call parser: {}; reasoning parser: {}{}",
        options.tool_call_parser.unwrap_or("none"),
        options.reasoning_parser.as_deref().unwrap_or("none"),
        if options.api_key.is_some() {
            "; API key required on /v1/*"
        } else {
            ""
        },
    );
    let state = Arc::new(AppState {
        client: Arc::clone(&client),
        token_texts: Arc::new(TokenTexts::new(tokenizer.clone())),
        tokenizer,
        template,
        model_name: Arc::from(args.served_model_name()),
        model_root: args.model.clone(),
        created: unix_now(),
        max_model_len: ready.max_model_len,
        vocab_size: ready.vocab_size,
        admission: Admission::new(options.max_concurrent_requests),
        options,
        metrics: Arc::new(Metrics::default()),
    });
    tracing::info!(
        "model {:?} ({}); {}: {}, max_model_len {}, vocab {}{}",
        args.served_model_name(),
        args.model,
        match &engines {
            Engines::Spawned(processes) => {
                let pids: Vec<String> = processes.iter().map(|p| p.pid().to_string()).collect();
                format!("engine pid {}", pids.join(", "))
            }
            Engines::Supervised => {
                let indices: Vec<String> = client
                    .engine_stats()
                    .iter()
                    .map(|(index, _)| index.to_string())
                    .collect();
                format!("engine {}", indices.join(", "))
            }
        },
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

    let (stop_tx, mut server) = spawn_http(listener, router(state));
    tracing::info!("listening on http://{local}");
    let stats = tokio::spawn(log_stats(Arc::clone(&client)));

    let code = tokio::select! {
        name = signals.recv() => {
            let timeout = args.shutdown_timeout();
            drain(&client, &engines, &mut server, stop_tx, timeout, name, signals).await
        }
        reason = engines.exited() => {
            client.mark_dead(reason);
            die(&client, &engines, &mut server, stop_tx).await
        }
        _ = client.died() => die(&client, &engines, &mut server, stop_tx).await,
        joined = &mut server => {
            tracing::error!("the HTTP server stopped: {joined:?}");
            client.set_stopping();
            engines.stop(ENGINE_STOP_GRACE).await;
            1
        }
    };
    stats.abort();
    Ok(code)
}

async fn drain(
    client: &EngineClient,
    engines: &Engines,
    server: &mut ServerTask,
    stop: tokio::sync::oneshot::Sender<()>,
    timeout: Duration,
    name: &str,
    signals: &mut Signals,
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
        _ = signals.recv() => {
            tracing::warn!("second signal: stopping now");
            cut_off(client, server).await;
        }
        reason = engines.exited() => {
            client.mark_dead(reason);
            let _ = tokio::time::timeout(DEATH_DRAIN, &mut *server).await;
            code = 1;
        }
        _ = client.died() => {
            let _ = tokio::time::timeout(DEATH_DRAIN, &mut *server).await;
            code = 1;
        }
    }
    client.set_stopping();
    engines.stop(ENGINE_STOP_GRACE).await;
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
    engines: &Engines,
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
    engines.stop(Duration::from_secs(1)).await;
    match client.dead_reason() {
        Some(reason) => tracing::error!("exiting because an engine is gone: {reason}"),
        None => tracing::error!("exiting because the engine is gone"),
    }
    1
}

/// Logs the engine's load every 10 s while there is any.
async fn log_stats(client: Arc<EngineClient>) {
    let mut tick = tokio::time::interval(Duration::from_secs(10));
    tick.tick().await;
    let mut was_idle = true;
    loop {
        tick.tick().await;
        let engines = client.engine_stats();
        let in_flight = client.in_flight();
        let idle = in_flight == 0
            && engines
                .iter()
                .all(|(_, s)| s.num_running == 0 && s.num_waiting == 0);
        if !(idle && was_idle) {
            for ((index, stats), (_, in_flight, routed)) in
                engines.iter().zip(client.engine_loads())
            {
                tracing::info!(
                    "engine {index}: {} running, {} waiting, KV cache {:.1}% used, {} preemptions; {in_flight} request(s) in flight, {routed} routed",
                    stats.num_running,
                    stats.num_waiting,
                    stats.kv_cache_usage * 100.0,
                    stats.num_preemptions,
                );
            }
        }
        was_idle = idle;
    }
}
