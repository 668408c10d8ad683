//! The owner threads of the engine sockets (a child of `engine_client`): the input
//! thread sends ADD frames and per-engine batches of ABORTs to the right identity; the
//! output thread decodes engine outputs and hands them to their requests.

use std::sync::mpsc as std_mpsc;

use vrs_wire::{AbortRequests, EngineOutputs, RequestType, ENGINE_DEAD_SENTINEL};

use super::{Command, Shared, MAX_BATCH};

fn send_frames(
    socket: &zmq::Socket,
    identity: &[u8],
    kind: RequestType,
    body: Vec<u8>,
) -> zmq::Result<()> {
    socket.send(identity, zmq::SNDMORE)?;
    socket.send(&[kind.as_byte()][..], zmq::SNDMORE)?;
    socket.send(body, 0)
}

pub(super) fn input_loop(socket: &zmq::Socket, rx: &std_mpsc::Receiver<Command>, shared: &Shared) {
    // Aborts batched per engine slot.
    let mut aborts: Vec<Vec<String>> = vec![Vec::new(); shared.engines.len()];
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        let mut taken = 0;
        let mut result = Ok(());
        while let Some(command) = next.take() {
            match command {
                Command::Add(engine, request) => match vrs_wire::encode(&request) {
                    Ok(body) => {
                        let identity = &shared.engines[engine].identity;
                        result = send_frames(socket, identity, RequestType::Add, body)
                            .map_err(|e| (engine, e));
                    }
                    Err(e) => {
                        tracing::error!(request_id = %request.request_id, "cannot encode: {e}")
                    }
                },
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
            let message = AbortRequests {
                request_ids: std::mem::take(ids),
            };
            match vrs_wire::encode(&message) {
                Ok(body) => {
                    let identity = &shared.engines[engine].identity;
                    result = send_frames(socket, identity, RequestType::Abort, body)
                        .map_err(|e| (engine, e));
                }
                Err(e) => tracing::error!("cannot encode an abort: {e}"),
            }
        }
        if let Err((engine, e)) = result {
            let index = shared.engines[engine].index;
            shared.mark_dead(format!("cannot send to engine {index}: {e}").into());
            return;
        }
    }
}

pub(super) fn output_loop(
    socket: &zmq::Socket,
    shared: &Shared,
    aborts: &std_mpsc::Sender<Command>,
) {
    let mut message = zmq::Message::new();
    loop {
        if let Err(e) = socket.recv(&mut message, 0) {
            shared.mark_dead(format!("engine output socket failed: {e}").into());
            return;
        }
        // Aux frames (none in protocol v1) would follow the first; drain them.
        let mut more = message.get_more();
        while more {
            let mut aux = zmq::Message::new();
            more = socket.recv(&mut aux, 0).is_ok() && aux.get_more();
        }
        if &message[..] == ENGINE_DEAD_SENTINEL {
            shared.mark_dead("the engine reported a fatal error and stopped".into());
            return;
        }
        match vrs_wire::decode::<EngineOutputs>(&message) {
            Ok(outputs) => {
                for (engine, id) in shared.dispatch(outputs) {
                    // Closed: the input thread is gone with the engine.
                    let _ = aborts.send(Command::Abort(engine, id));
                }
            }
            Err(e) => {
                shared.mark_dead(format!("undecodable message from the engine: {e}").into());
                return;
            }
        }
    }
}
