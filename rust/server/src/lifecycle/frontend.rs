//! `vrs-rs frontend`: serve on sockets and engines that the parent (`vrs frontend`)
//! set up. The parent binds the HTTP and engine listeners, starts and handshakes the
//! engines, then runs this with the fds inherited; vrs-rs adopts them (see
//! [`vrs_engine_client::adopt`]), waits for each engine's READY on the input socket and
//! serves exactly like `serve`. The engines are the parent's to supervise: vrs-rs never
//! signals them, and learns of an engine's death from its closed connection.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use vrs_engine_client::adopt::{self, EngineListeners, InheritedListener};
use vrs_engine_client::engines::Engines;
use vrs_engine_client::{launcher, EngineClient, EngineError};

use super::Signals;
use crate::args::ServeArgs;

/// The sockets a parent process bound and handed over, and the engines behind them.
#[derive(Debug, Clone)]
pub struct Inherited {
    /// Listening socket to serve HTTP on: TCP, or a Unix domain socket (`--uds`).
    pub listen_fd: RawFd,
    /// Listening socket that becomes the engines' input ROUTER.
    pub input_listener_fd: RawFd,
    /// Listening socket that becomes the engines' output PULL.
    pub output_listener_fd: RawFd,
    /// Address the input listener is bound to, as the engines were told in INIT.
    pub input_address: String,
    /// Address the output listener is bound to.
    pub output_address: String,
    /// Index of the first engine served here.
    pub engine_start_index: u16,
    /// Number of engines served here (each sends READY on the input socket).
    pub engine_count: u16,
}

/// Serves on the inherited sockets to the end; returns the exit code.
pub async fn run(sockets: Inherited, args: ServeArgs) -> u8 {
    match serve(sockets, args).await {
        Ok(code) => code,
        Err(e) => {
            tracing::error!("{e}");
            1
        }
    }
}

async fn serve(sockets: Inherited, args: ServeArgs) -> anyhow::Result<u8> {
    let mut signals = Signals::new()?;
    let EngineListeners {
        input,
        output,
        mut lost,
    } = adopt::engine_listeners(
        InheritedListener {
            fd: sockets.input_listener_fd,
            flag: "--input-listener-fd",
            address: &sockets.input_address,
        },
        InheritedListener {
            fd: sockets.output_listener_fd,
            flag: "--output-listener-fd",
            address: &sockets.output_address,
        },
    )?;
    let endpoint = super::endpoint::adopt(
        adopt::http_listener(sockets.listen_fd, "--listen-fd").map_err(EngineError::Setup)?,
        &args.http,
    )?;

    let text = super::startup::load_text(&args)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let (first, count) = (sockets.engine_start_index, sockets.engine_count);
    let ready = tokio::task::spawn_blocking(move || {
        adopt::wait_ready(&input, first, count, launcher::ready_timeout(), &flag)
            .map(|readies| (input, readies))
    });
    let ((input, readies), text) =
        match super::startup::ready_and_text(ready, text, &mut signals, &cancel).await {
            Ok(both) => both,
            Err(code) => return Ok(code),
        };
    let (identities, readies): (Vec<_>, Vec<_>) = readies.into_iter().unzip();
    let client = EngineClient::start(
        input,
        output,
        identities,
        Arc::new(vrs_engine_client::VrsWire),
    )?;
    let watcher = Arc::clone(&client);
    tokio::spawn(async move {
        if let Some(reason) = lost.recv().await {
            watcher.mark_dead(reason);
        }
    });
    super::serve_connected(
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
