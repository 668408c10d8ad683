//! The engine sockets' I/O (a child of `engine_client`): the input thread sends the ADD
//! frames `submit` could not send itself and per-engine batches of ABORTs to the right
//! identity; the output task, on the tokio runtime, reads each multipart message whole,
//! decodes it through the client's [`Wire`](crate::wire::Wire) and hands the outputs to
//! their requests.

use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use super::{Command, Shared, MAX_BATCH};
use crate::error::EngineError;
use crate::wire::Decoded;
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// One message (`frames` after the identity) to the engine with ROUTER identity
/// `identity`.
pub(super) fn send_frames(
    socket: &zmq::Socket,
    identity: &[u8],
    frames: Vec<Vec<u8>>,
) -> zmq::Result<()> {
    socket.send(identity, zmq::SNDMORE)?;
    let last = frames.len().saturating_sub(1);
    for (i, frame) in frames.into_iter().enumerate() {
        socket.send(frame, if i < last { zmq::SNDMORE } else { 0 })?;
    }
    Ok(())
}

/// Puts an encoded ADD for engine slot `engine` on the input ROUTER from the calling
/// thread when the input thread is not using the socket, else queues it for that thread.
/// A failed send marks the engines dead.
pub(super) fn send_add(
    input: &Mutex<zmq::Socket>,
    commands: &std_mpsc::Sender<Command>,
    shared: &Shared,
    engine: usize,
    frames: Vec<Vec<u8>>,
) -> Result<(), EngineError> {
    if let Ok(socket) = input.try_lock() {
        let slot = &shared.engines[engine];
        return send_frames(&socket, &slot.identity, frames)
            .map_err(|e| EngineError::Dead(send_failed(shared, engine, &e)));
    }
    commands
        .send(Command::Add(engine, frames))
        .map_err(|_| EngineError::Dead("the engine connection is closed".into()))
}

/// A send to engine slot `engine` failed: every engine is marked dead with the reason,
/// which is returned.
fn send_failed(shared: &Shared, engine: usize, error: &zmq::Error) -> String {
    let reason = format!(
        "cannot send to engine {}: {error}",
        shared.engines[engine].index
    );
    shared.mark_dead(reason.as_str().into());
    reason
}

pub(super) fn input_loop(
    socket: &Mutex<zmq::Socket>,
    rx: &std_mpsc::Receiver<Command>,
    shared: &Shared,
) {
    // Aborts batched per engine slot.
    let mut aborts: Vec<Vec<String>> = vec![Vec::new(); shared.engines.len()];
    while let Ok(first) = rx.recv() {
        // A panic elsewhere while holding the lock leaves the socket itself usable.
        let socket = socket.lock().unwrap_or_else(PoisonError::into_inner);
        let mut next = Some(first);
        let mut taken = 0;
        let mut result = Ok(());
        while let Some(command) = next.take() {
            match command {
                Command::Add(engine, frames) => {
                    let identity = &shared.engines[engine].identity;
                    result = send_frames(&socket, identity, frames).map_err(|e| (engine, e));
                }
                Command::Abort(engine, id) => aborts[engine].push(id),
            }
            if result.is_err() {
                break;
            }
            taken += 1;
            if taken < MAX_BATCH {
                next = rx.try_recv().ok();
            }
        }
        for (engine, ids) in aborts.iter_mut().enumerate() {
            if result.is_err() || ids.is_empty() {
                continue;
            }
            match shared.wire.encode_abort(std::mem::take(ids)) {
                Ok(frames) => {
                    let identity = &shared.engines[engine].identity;
                    result = send_frames(&socket, identity, frames).map_err(|e| (engine, e));
                }
                Err(e) => tracing::error!("cannot encode an abort: {e}"),
            }
        }
        drop(socket);
        if let Err((engine, e)) = result {
            send_failed(shared, engine, &e);
            return;
        }
    }
}

/// Reads the output PULL from the tokio runtime: its `ZMQ_FD` is registered with the
/// runtime's reactor, and on each signal every message waiting is decoded and handed to
/// its requests from a runtime worker, so that their tasks are scheduled on that worker
/// (no thread hand-off, no cross-thread wake-up per message). `ZMQ_FD` is edge-triggered:
/// the readiness is cleared before the socket is drained to `EAGAIN`, so a message that
/// arrives meanwhile signals again and is never missed.
pub(super) async fn output_task(
    socket: zmq::Socket,
    shared: Arc<Shared>,
    aborts: std_mpsc::Sender<Command>,
) {
    let fd = match socket.get_fd() {
        Ok(fd) => fd,
        Err(e) => {
            shared.mark_dead(format!("engine output socket failed: {e}").into());
            return;
        }
    };
    // SAFETY: `fd` is the socket's ZMQ_FD, open as long as `socket` is; `ready` is a local
    // of this function, so it is dropped (deregistered) before `socket`, a parameter.
    let registered = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) };
    let ready = match registered {
        Ok(ready) => ready,
        Err(e) => {
            shared.mark_dead(format!("cannot poll the engine output socket: {e}").into());
            return;
        }
    };
    // The frames of one message, reused: on vrs's wire (one frame) no allocation per message.
    let mut frames = vec![zmq::Message::new()];
    loop {
        loop {
            frames.truncate(1);
            match socket.recv(&mut frames[0], zmq::DONTWAIT) {
                Ok(()) => {
                    if !take(&socket, &mut frames, &shared, &aborts) {
                        return;
                    }
                    // A flood of messages must not starve the tasks they woke on this
                    // worker: yield once the task's cooperative budget is spent.
                    tokio::task::consume_budget().await;
                }
                Err(zmq::Error::EAGAIN) => break,
                Err(e) => {
                    shared.mark_dead(format!("engine output socket failed: {e}").into());
                    return;
                }
            }
        }
        // Commands processed by the last `recv` may have queued a message without a new
        // signal on the fd: look once more before waiting.
        match socket.get_events() {
            Ok(events) if events.contains(zmq::POLLIN) => continue,
            Ok(_) => {}
            Err(e) => {
                shared.mark_dead(format!("engine output socket failed: {e}").into());
                return;
            }
        }
        match ready.readable().await {
            Ok(mut guard) => guard.clear_ready(),
            Err(e) => {
                shared.mark_dead(format!("cannot poll the engine output socket: {e}").into());
                return;
            }
        }
    }
}

/// Hands out one received message (its first frame in `frames[0]`); `false` once the
/// engine is dead (reported).
fn take(
    socket: &zmq::Socket,
    frames: &mut Vec<zmq::Message>,
    shared: &Shared,
    aborts: &std_mpsc::Sender<Command>,
) -> bool {
    // Aux frames (vLLM's large arrays) follow the first; the parts of a message arrive
    // together, so this does not wait.
    while frames.last().is_some_and(zmq::Message::get_more) {
        let mut aux = zmq::Message::new();
        if let Err(e) = socket.recv(&mut aux, 0) {
            shared.mark_dead(format!("engine output socket failed: {e}").into());
            return false;
        }
        frames.push(aux);
    }
    match shared.wire.decode(frames) {
        Ok(Decoded::Dead) => {
            shared.mark_dead("the engine reported a fatal error and stopped".into());
            false
        }
        Ok(Decoded::Outputs(outputs)) => {
            for (engine, id) in shared.dispatch(outputs) {
                // Closed: the input thread is gone with the engine.
                let _ = aborts.send(Command::Abort(engine, id));
            }
            true
        }
        Err(e) => {
            shared.mark_dead(e.to_string().into());
            false
        }
    }
}
