//! `vrs-rs serve` startup: load the tokenizer and template, bind HTTP (connections wait
//! in the kernel backlog), bind the engine sockets (tcp:// ones for engines on other
//! hosts), spawn the local engines, handshake, then serve (see [`super::serve_connected`]).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use vrs_engine_client::engines::{self, Engines, ENGINE_STOP_GRACE};
use vrs_engine_client::launcher::{self, EngineProcess};
use vrs_engine_client::{scaleout, EngineClient, EngineError};

use super::Signals;
use crate::args::ServeArgs;

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
    let mut signals = Signals::new()?;

    let text = super::startup::load_text(&args)?;

    let endpoint = super::endpoint::bind(&args.http, args.host(), args.port()).await?;

    let size = args.data_parallel_size();
    let (sockets, lost) = if args.data_parallel_size_local() < size {
        let (sockets, lost) = scaleout::bind_tcp_sockets(
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
    let processes = engines::spawn_local(
        args.python_executable(),
        &sockets.handshake_address,
        args.data_parallel_size_local(),
        args.log_level(),
    )
    .await?;

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
            .map_err(|e| EngineError::Task(e.to_string()))?
            .map_err(EngineError::Setup)
    };
    let engine = async {
        handshake
            .await
            .map_err(|e| EngineError::Task(e.to_string()))?
    };
    let outcome = tokio::select! {
        both = async { tokio::try_join!(engine, text) } => {
            both.map(|((connected, dir), text)| (connected, dir, text))
        }
        _ = signals.recv() => Err(EngineError::Cancelled),
    };
    let (connected, ipc_dir, text) = match outcome {
        Ok(ok) => ok,
        Err(e) => {
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            let cancelled = matches!(e, EngineError::Cancelled);
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
    let client = EngineClient::start(
        connected.input,
        connected.output,
        identities,
        Arc::new(vrs_engine_client::VrsWire),
    )?;
    if let Some(mut lost) = lost {
        let watcher = Arc::clone(&client);
        tokio::spawn(async move {
            if let Some(reason) = lost.recv().await {
                watcher.mark_dead(format!("an engine left: {reason}"));
            }
        });
    }
    let code = super::serve_connected(
        &args,
        endpoint,
        client,
        readies,
        text,
        processes,
        &mut signals,
    )
    .await;
    drop(ipc_dir);
    code
}
