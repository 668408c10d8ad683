//! `serve --engine vllm` (issue #33's ways 2 and 3): load the tokenizer and template, bind
//! HTTP, bind the handshake on `tcp://DATA_PARALLEL_ADDRESS:PORT` (an ephemeral port when
//! every engine is local and no `--data-parallel-rpc-port` is given), start vLLM's
//! headless engine for the local engines ([`super::launch`]), and wait for all
//! `--data-parallel-size` engines; remote ones (`--data-parallel-size-local 0`) join the
//! same handshake. An engine process that exits before it is ready ends start-up at once;
//! an engine connection that closes later (a remote engine killed, which has no process
//! here to watch) marks the client dead: open and new requests get 503, vrs-rs exits 1.
//! vLLM's data-parallel coordinator is not run here: with `--data-parallel-size` > 1 the
//! engines run without one, which a dense model allows (each engine on its own) and a
//! mixture-of-experts model does not (its ranks step in waves the coordinator starts):
//! that is refused at start-up ([`super::needs_coordinator`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use vrs_engine_client::engines::{Engines, ENGINE_STOP_GRACE};
use vrs_engine_client::vllm::{bind_sockets, handshake};
use vrs_engine_client::{launcher, EngineError};

use super::super::Signals;
use crate::args::engine::VllmHandshake;
use crate::args::ServeArgs;

/// Runs `serve --engine vllm` to the end; returns the exit code.
pub async fn run(args: ServeArgs) -> u8 {
    match serve(args).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            1
        }
    }
}

/// The port of a bound `tcp://HOST:PORT` endpoint.
fn bound_port(endpoint: &str) -> Result<u16, EngineError> {
    endpoint
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .ok_or_else(|| {
            EngineError::Setup(format!("the handshake endpoint {endpoint:?} has no port"))
        })
}

async fn serve(args: ServeArgs) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;
    let text = super::super::startup::load_text(&args)?;
    let endpoint = super::super::endpoint::bind(&args.http, args.host(), args.port()).await?;

    let (size, local) = (args.data_parallel_size(), args.data_parallel_size_local());
    if let Some(why) = super::needs_coordinator(&args, size) {
        return Err(EngineError::Setup(why).into());
    }
    let port = if local < size {
        args.data_parallel_rpc_port()
    } else {
        args.specific.data_parallel_rpc_port.unwrap_or(0)
    };
    let host = args.data_parallel_address().to_owned();
    let sockets = bind_sockets(&format!("tcp://{host}:{port}"))?;
    let handshake_at = VllmHandshake {
        port: bound_port(&sockets.handshake_address)?,
        host,
    };
    if local < size {
        tracing::info!(
            "waiting for vLLM engines {local}..{size} to join: vllm serve MODEL --headless \
             --data-parallel-address {} --data-parallel-rpc-port {} --data-parallel-size \
             {size} --data-parallel-start-rank {local} --data-parallel-size-local K",
            handshake_at.host,
            handshake_at.port
        );
    }
    let engines = if local > 0 {
        super::launch::spawn(&args, &handshake_at)?
    } else {
        Engines::Spawned(Vec::new())
    };

    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let timeout = launcher::ready_timeout();
    let group =
        tokio::task::spawn_blocking(move || handshake(sockets, usize::from(size), timeout, &flag));
    let text = async {
        text.await
            .map_err(|e| EngineError::Task(e.to_string()))?
            .map_err(EngineError::Setup)
    };
    let group = async { group.await.map_err(|e| EngineError::Task(e.to_string()))? };
    let outcome = tokio::select! {
        both = async { tokio::try_join!(group, text) } => both,
        reason = engines.exited() => Err(EngineError::Setup(format!(
            "vLLM's engine stopped before it was ready: {reason}; its log is above"
        ))),
        _ = signals.recv() => Err(EngineError::Cancelled),
    };
    let (group, text) = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            cancel.store(true, Ordering::SeqCst);
            let cancelled = matches!(e, EngineError::Cancelled);
            if cancelled {
                tracing::info!("interrupted during engine startup; stopping the engine");
            } else {
                tracing::error!("{e}");
            }
            engines.stop(ENGINE_STOP_GRACE).await;
            return Ok(if cancelled { 0 } else { 1 });
        }
    };
    let info = super::model_info(&args, &text);
    let (client, readies) =
        super::connect(group.input, group.output, group.engines, 0, &info, None)?;
    let (watcher, mut lost) = (Arc::clone(&client), group.lost);
    tokio::spawn(async move {
        if let Some(reason) = lost.recv().await {
            watcher.mark_dead(reason);
        }
    });
    let code = super::super::serve_connected(
        &args,
        endpoint,
        client,
        readies,
        text,
        engines,
        &mut signals,
    )
    .await;
    drop(group.ipc_dir);
    code
}
