//! Engines on other hosts: `serve` with `data_parallel_size_local < data_parallel_size`
//! binds the handshake ROUTER on `tcp://ADDRESS:RPC_PORT` and the input ROUTER and
//! output PULL on free ports of the same address (INIT tells every engine those
//! endpoints). Engines `K..N` join with `vrs serve MODEL --headless --handshake-address
//! tcp://ADDRESS:RPC_PORT --engine-index I`. A remote engine has no process here to
//! watch: its closed connection (input ROUTER monitor) marks the group dead.

use tokio::sync::mpsc;

use crate::adopt;
use crate::error::EngineError;
use crate::launcher::{self, Sockets};

/// The three engine sockets on tcp://, and the disconnect reports of the input ROUTER.
pub fn bind_tcp_sockets(
    host: &str,
    rpc_port: u16,
) -> Result<(Sockets, mpsc::UnboundedReceiver<String>), EngineError> {
    // Kept for the Sockets contract (ipc paths live there); nothing is bound in it.
    let dir = tempfile::Builder::new().prefix("vrs-").tempdir()?;
    let ctx = zmq::Context::new();
    let handshake = ctx.socket(zmq::ROUTER)?;
    let input = ctx.socket(zmq::ROUTER)?;
    let output = ctx.socket(zmq::PULL)?;
    for socket in [&handshake, &input, &output] {
        launcher::set_engine_socket_options(socket)?;
    }
    let bind = |socket: &zmq::Socket, address: String| -> Result<String, EngineError> {
        socket
            .bind(&address)
            .map_err(|e| EngineError::Setup(format!("cannot bind {address}: {e}")))?;
        match socket.get_last_endpoint()? {
            Ok(endpoint) => Ok(endpoint),
            Err(_) => Err(EngineError::Setup(format!(
                "{address}: the bound endpoint is not text"
            ))),
        }
    };
    let lost = adopt::watch_disconnects(&ctx, &input)?;
    let handshake_address = bind(&handshake, format!("tcp://{host}:{rpc_port}"))?;
    let input_address = bind(&input, format!("tcp://{host}:*"))?;
    let output_address = bind(&output, format!("tcp://{host}:*"))?;
    tracing::info!(
        "engine sockets on tcp: handshake {handshake_address}, input {input_address}, output {output_address}"
    );
    Ok((
        Sockets {
            dir,
            handshake,
            input,
            output,
            handshake_address,
            input_address,
            output_address,
        },
        lost,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_free_ports_on_the_address() {
        let (sockets, _lost) = bind_tcp_sockets("127.0.0.1", 0).unwrap();
        for address in [&sockets.input_address, &sockets.output_address] {
            let port: u16 = address
                .rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap();
            assert!(
                address.starts_with("tcp://127.0.0.1:") && port > 0,
                "{address}"
            );
        }
    }
}
