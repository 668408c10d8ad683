//! `vrs-rs frontend` under vLLM's contract (issue #33's way 1:
//! `VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=vrs-rs vllm serve MODEL`). vLLM's
//! process manager bound the HTTP socket and the engines' input ROUTER and output PULL
//! listeners, ran HELLO/READY with its engines, and passes the fds on. vrs-rs adopts
//! them (their addresses read from the sockets), waits for each engine's ready response
//! on the input socket and serves. The engines are vLLM's to supervise. With data
//! parallelism vLLM also runs its coordinator; vrs-rs follows it
//! ([`vrs_engine_client::vllm::Coordinator`]) as vLLM's own frontend does.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use vrs_engine_client::adopt::{self, EngineListeners, InheritedListener};
use vrs_engine_client::engines::Engines;
use vrs_engine_client::vllm::{listener_address, wait_ready, Coordinator};
use vrs_engine_client::{launcher, EngineError};

use super::super::Signals;
use crate::args::vllm::VllmFrontendArgs;

/// The sockets vLLM's supervisor bound and handed over, and the engines behind them.
#[derive(Debug, Clone)]
pub struct VllmInherited {
    /// `--listen-fd`: HTTP (TCP, or a Unix socket for `--uds`).
    pub listen_fd: RawFd,
    /// `--input-listener-fd`: becomes the engines' input ROUTER.
    pub input_listener_fd: RawFd,
    /// `--output-listener-fd`: becomes the engines' output PULL.
    pub output_listener_fd: RawFd,
    /// `--engine-start-index`: the first engine served here.
    pub engine_start_index: u16,
    /// `--engine-count`: engines served here (each sends its ready response).
    pub engine_count: u16,
    /// `--coordinator-address`: vLLM's data-parallel coordinator's publish address
    /// (`vllm serve` with `--data-parallel-size` > 1), followed for its wave and counts.
    pub coordinator_address: Option<String>,
}

/// vLLM's supervisor hands over its HTTP socket bound but not listening (uvicorn, its
/// Python frontend, calls `listen` itself); so does vrs-rs. On a socket that listens
/// already, `listen` only sets the backlog.
fn start_listening(fd: RawFd) -> Result<(), EngineError> {
    // SAFETY: plain syscall on an inherited fd; a bad fd is an error return.
    if unsafe { libc::listen(fd, libc::SOMAXCONN) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(EngineError::Setup(format!(
            "--listen-fd {fd}: cannot listen on it ({e}); vLLM's supervisor passes its bound \
             HTTP socket"
        )));
    }
    Ok(())
}

/// Serves on the inherited sockets to the end; returns the exit code.
pub async fn run(sockets: VllmInherited, args: VllmFrontendArgs) -> u8 {
    match serve(sockets, args).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            1
        }
    }
}

async fn serve(sockets: VllmInherited, vllm: VllmFrontendArgs) -> anyhow::Result<u8> {
    let args = vllm.serve;
    let mut signals = Signals::new()?;
    let input_address = listener_address(sockets.input_listener_fd, "--input-listener-fd")?;
    let output_address = listener_address(sockets.output_listener_fd, "--output-listener-fd")?;
    let EngineListeners {
        input,
        output,
        mut lost,
    } = adopt::engine_listeners(
        InheritedListener {
            fd: sockets.input_listener_fd,
            flag: "--input-listener-fd",
            address: &input_address,
        },
        InheritedListener {
            fd: sockets.output_listener_fd,
            flag: "--output-listener-fd",
            address: &output_address,
        },
    )?;
    let (first, count) = (sockets.engine_start_index, sockets.engine_count);
    let coordinator = match &sockets.coordinator_address {
        Some(address) => Some(Coordinator::connect(address, first, count)?),
        None => None,
    };
    start_listening(sockets.listen_fd)?;
    let endpoint = super::super::endpoint::adopt(
        adopt::http_listener(sockets.listen_fd, "--listen-fd").map_err(EngineError::Setup)?,
        &args.http,
    )?;

    let text = super::super::startup::load_text(&args)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let timeout: Duration = vllm.ready_timeout.unwrap_or_else(launcher::ready_timeout);
    let ready = tokio::task::spawn_blocking(move || {
        wait_ready(&input, first, count, timeout, &flag).map(|engines| (input, engines))
    });
    let ((input, engines), text) =
        match super::super::startup::ready_and_text(ready, text, &mut signals, &cancel).await {
            Ok(both) => both,
            Err(code) => return Ok(code),
        };
    let info = super::model_info(&args, &text);
    let (client, readies) = super::connect(input, output, engines, first, &info, coordinator)?;
    let watcher = Arc::clone(&client);
    tokio::spawn(async move {
        if let Some(reason) = lost.recv().await {
            watcher.mark_dead(reason);
        }
    });
    super::super::serve_connected(
        &args,
        endpoint,
        client,
        readies,
        text,
        Engines::Supervised,
        &mut signals,
    )
    .await
}
