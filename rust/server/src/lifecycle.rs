//! Startup order and shutdown of a serving vrs-rs: `serve` (in [`serve`]) and
//! `frontend` (in [`frontend`]) both end in [`serve_connected`]; the engine-less render
//! service starts in [`render`].
//!
//! Shutdown: SIGINT/SIGTERM drain in-flight requests (bounded by `shutdown_timeout`)
//! then stop the engine group and exit 0; engine death fails open requests, stops
//! accepting and exits 1.

use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, Signal, SignalKind};
use vrs_engine_client::engines::{Engines, ENGINE_STOP_GRACE};
use vrs_engine_client::EngineClient;
use vrs_wire::Ready;

use crate::args::ServeArgs;
use crate::edge::admission::Admission;
use crate::edge::listener::{Endpoint, ServerTask};
use crate::edge::metrics::Metrics;
use crate::edge::queue::Queue;
use crate::edge::trace::{self, Traces};
use crate::logprobs::TokenTexts;
use crate::state::{unix_now, AppState, HttpOptions};
use crate::text::Text;

pub mod endpoint;
pub mod frontend;
pub mod render;
pub mod serve;
mod startup;
pub mod vllm;

/// How long the server keeps answering (503) after the engine died, so that clients
/// see why rather than a refused connection.
const DEATH_LINGER: Duration = Duration::from_secs(1);
/// How long streams get to end after that.
const DEATH_DRAIN: Duration = Duration::from_secs(3);

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

/// Serves HTTP on `endpoint` with the engines behind `client` (`readies`: the READY of
/// each; the lowest index's says what the model serves) until a signal (drain, exit 0),
/// an engine's death or the server failing (exit 1); returns the exit code.
pub async fn serve_connected(
    args: &ServeArgs,
    endpoint: Endpoint,
    client: Arc<EngineClient>,
    mut readies: Vec<Ready>,
    (tokenizer, template): Text,
    engines: Engines,
    signals: &mut Signals,
) -> anyhow::Result<u8> {
    readies.sort_by_key(|ready| ready.engine_index);
    let Some(ready) = readies.first().cloned() else {
        return Err(anyhow::anyhow!("no engine sent READY"));
    };
    let url = endpoint.url();
    let source = crate::text::template_source(&tokenizer, args.chat_template.as_deref());
    let config = crate::parsers::select::model_config(std::path::Path::new(&args.model));
    let (tools, reasoning) = crate::parsers::select::choose(
        args.specific.tool_call_parser.as_deref(),
        args.specific.reasoning_parser.as_deref(),
        source.as_deref(),
        config.as_ref(),
    )
    .map_err(anyhow::Error::msg)?;
    let mut options =
        HttpOptions::from_args(args, &tools, &reasoning).map_err(anyhow::Error::msg)?;
    if args.specific.enable_tokenizer_info_endpoint {
        let dir = std::path::Path::new(args.tokenizer_dir());
        let template = args.chat_template.as_deref().map(std::path::Path::new);
        let info = crate::text::tokenizer_info::tokenizer_info(dir, template)
            .map_err(anyhow::Error::msg)?;
        options.tokenizer_info = Some(serde_json::to_vec(&info)?.into());
    }
    if options.api_key.is_some() {
        tracing::info!("API key required on /v1/*");
    }
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
        eos_token_ids: ready.eos_token_ids.clone(),
        serves: crate::state::Serves::of(&ready),
        readies,
        admission: Admission::new(options.max_concurrent_requests),
        queue: Queue::new(options.queue),
        options,
        metrics: Arc::new(Metrics::default()),
    });
    tracing::info!(
        "model {:?} ({}); {}: {}, max_model_len {}, vocab {}{}",
        args.served_model_name(),
        args.model,
        match &engines {
            Engines::Spawned(processes) if processes.is_empty() => {
                format!("{} remote engine(s)", client.engine_stats().len())
            }
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

    let traces = match args.otlp_traces_endpoint() {
        Some(endpoint) => Some(
            Traces::start(endpoint, args.collect_detailed_traces(), state.model_name())
                .map_err(anyhow::Error::msg)?,
        ),
        None => None,
    };
    let app = trace::layer(crate::routes::router(state), traces.as_ref());
    let (stop_tx, mut server) = endpoint.spawn(app);
    // The announcement comes from the process that listens, once it does (the `vrs` CLI
    // prints no address before handing over).
    tracing::info!(
        "serving {:?} on {url} (POST /v1/completions, /v1/chat/completions; \
         GET /v1/models, /health, /metrics); Ctrl-C to stop (twice to stop now)",
        args.served_model_name()
    );
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
    if let Some(traces) = traces {
        traces.shutdown().await;
    }
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
