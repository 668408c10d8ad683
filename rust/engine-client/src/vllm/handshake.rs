//! The frontend-owned handshake with vLLM engines, as vLLM's `wait_for_engine_startup`
//! runs it (and `vllm serve --headless` engines and `vllm-mock-engine` expect): the
//! frontend binds a handshake ROUTER, the input ROUTER and the output PULL; each engine
//! (a DEALER whose identity is its index, 2 bytes little-endian) sends HELLO, gets the
//! `EngineHandshakeMetadata` (where to connect) and, once loaded, sends READY; then its
//! first message on the input socket is its `EngineCoreReadyResponse`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use vrs_wire::vllm::{self as v, EngineCoreReadyResponse, HandshakeStatus, OrderedMap};

use crate::adopt::watch_disconnects;
use crate::error::EngineError;
use crate::launcher::set_engine_socket_options;

/// The three frontend sockets, bound, before any engine connected.
pub struct VllmSockets {
    pub handshake: zmq::Socket,
    pub input: zmq::Socket,
    pub output: zmq::Socket,
    /// Where engines send HELLO (the bound endpoint: a `:0` port resolved).
    pub handshake_address: String,
    /// Where engines connect their input DEALER and output PUSH.
    pub input_address: String,
    pub output_address: String,
    /// The ipc sockets' private directory (ipc handshake addresses), removed on drop.
    pub ipc_dir: Option<tempfile::TempDir>,
    /// Why an engine's connection to the input ROUTER closed, as it happens.
    pub lost: mpsc::UnboundedReceiver<String>,
}

/// The engines after the handshake: the sockets to give
/// [`EngineClient::start`](crate::EngineClient::start) and, by engine index, each
/// engine's identity and ready response.
pub struct VllmGroup {
    pub input: zmq::Socket,
    pub output: zmq::Socket,
    pub engines: Vec<(Vec<u8>, EngineCoreReadyResponse)>,
    pub ipc_dir: Option<tempfile::TempDir>,
    /// Why an engine's connection closed (a remote engine that died has no process
    /// here to watch): mark the client dead on the first report.
    pub lost: mpsc::UnboundedReceiver<String>,
}

/// Binds the handshake ROUTER at `handshake_address` (`tcp://HOST:PORT`, port 0 for any,
/// or `ipc://PATH`), and the input ROUTER and output PULL beside it: on HOST's ephemeral
/// ports for tcp (HOST must be an address the engines reach, not a wildcard), in a
/// private directory for ipc. The input ROUTER is watched for engines leaving from
/// before its bind ([`VllmSockets::lost`]).
pub fn bind_sockets(handshake_address: &str) -> Result<VllmSockets, EngineError> {
    let ctx = zmq::Context::new();
    let (data, ipc_dir) = if let Some(rest) = handshake_address.strip_prefix("tcp://") {
        let host = rest.rsplit_once(':').map(|(h, _)| h).ok_or_else(|| {
            EngineError::Setup(format!(
                "handshake address {handshake_address:?}: expected tcp://HOST:PORT"
            ))
        })?;
        if matches!(host, "*" | "0.0.0.0" | "[::]" | "::") {
            return Err(EngineError::Setup(format!(
                "handshake address {handshake_address:?}: give the host the engines connect \
                 to (e.g. tcp://10.0.0.1:13345), not a wildcard"
            )));
        }
        ((format!("tcp://{host}:*"), format!("tcp://{host}:*")), None)
    } else if handshake_address.starts_with("ipc://") {
        let dir = tempfile::Builder::new().prefix("vrs-vllm-").tempdir()?;
        let path = |name: &str| format!("ipc://{}/{name}", dir.path().display());
        ((path("input"), path("output")), Some(dir))
    } else {
        return Err(EngineError::Setup(format!(
            "handshake address {handshake_address:?}: expected tcp://HOST:PORT or ipc://PATH"
        )));
    };
    let make = |kind: zmq::SocketType| {
        let socket = ctx.socket(kind)?;
        set_engine_socket_options(&socket)?;
        Ok::<_, EngineError>(socket)
    };
    let bind = |socket: zmq::Socket, address: &str, what: &str| {
        socket.bind(address).map_err(|e| {
            EngineError::Setup(format!("cannot bind the {what} socket at {address}: {e}"))
        })?;
        let bound = socket
            .get_last_endpoint()?
            .map_err(|_| EngineError::Setup(format!("the {what} endpoint is not UTF-8")))?;
        Ok::<_, EngineError>((socket, bound))
    };
    let input = make(zmq::ROUTER)?;
    let lost = watch_disconnects(&ctx, &input)?;
    let (handshake, handshake_address) = bind(make(zmq::ROUTER)?, handshake_address, "handshake")?;
    let (input, input_address) = bind(input, &data.0, "input")?;
    let (output, output_address) = bind(make(zmq::PULL)?, &data.1, "output")?;
    Ok(VllmSockets {
        handshake,
        input,
        output,
        handshake_address,
        input_address,
        output_address,
        ipc_dir,
        lost,
    })
}

/// Runs the handshake with engines `0..count`: HELLO → metadata, READY, then the ready
/// responses on the input socket. Every wait is bounded by `timeout` (an error naming
/// the engines that had not answered) and ends early when `cancel` is set.
pub fn handshake(
    sockets: VllmSockets,
    count: usize,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<VllmGroup, EngineError> {
    let count16 = u16::try_from(count)
        .ok()
        .filter(|&c| c > 0)
        .ok_or_else(|| EngineError::Setup(format!("cannot serve {count} vLLM engines")))?;
    let metadata = v::encode_handshake_metadata(&v::EngineHandshakeMetadata {
        addresses: v::EngineZmqAddresses {
            inputs: vec![sockets.input_address.clone()],
            outputs: vec![sockets.output_address.clone()],
            coordinator_input: None,
            coordinator_output: None,
            frontend_stats_publish_address: None,
        },
        // No data-parallel coordinator: the engines keep their own parallel settings.
        parallel_config: OrderedMap(Vec::new()),
    });
    let mut greeted = vec![false; count];
    let mut ready = vec![false; count];
    let deadline = Instant::now() + timeout;
    while ready.iter().any(|r| !r) {
        let (stage, present) = if greeted.iter().all(|g| *g) {
            ("READY", &ready)
        } else {
            ("HELLO", &greeted)
        };
        let frames = recv_until(&sockets.handshake, deadline, cancel)
            .map_err(|e| missing(e, stage, present, 0, timeout))?;
        let [identity, body] = <[Vec<u8>; 2]>::try_from(frames).map_err(|f| {
            EngineError::Protocol(format!(
                "vLLM handshake: expected [identity, message], got {} frames",
                f.len()
            ))
        })?;
        let slot = slot_of(&identity, 0, count16)?;
        let message = v::decode_handshake(&body).map_err(|e| {
            EngineError::Protocol(format!("vLLM handshake from engine {slot}: {e}"))
        })?;
        match message.status {
            HandshakeStatus::Hello if !greeted[slot] => {
                tracing::info!(
                    local = message.local,
                    headless = message.headless,
                    "vLLM engine {slot} connected; loading"
                );
                sockets.handshake.send(&identity[..], zmq::SNDMORE)?;
                sockets.handshake.send(&metadata[..], 0)?;
                greeted[slot] = true;
            }
            HandshakeStatus::Ready if greeted[slot] && !ready[slot] => {
                tracing::info!("vLLM engine {slot} is ready");
                ready[slot] = true;
            }
            status => {
                return Err(EngineError::Protocol(format!(
                    "unexpected {status:?} from vLLM engine {slot} (greeted: {}, ready: {})",
                    greeted[slot], ready[slot]
                )))
            }
        }
    }
    let engines = wait_ready_until(&sockets.input, 0, count16, deadline, timeout, cancel)?;
    Ok(VllmGroup {
        input: sockets.input,
        output: sockets.output,
        engines,
        ipc_dir: sockets.ipc_dir,
        lost: sockets.lost,
    })
}

/// The slot of the engine whose identity is `identity`, among `first..first + count`.
fn slot_of(identity: &[u8], first: u16, count: u16) -> Result<usize, EngineError> {
    let index = match identity {
        [lo, hi] => u16::from_le_bytes([*lo, *hi]),
        _ => u16::MAX,
    };
    index
        .checked_sub(first)
        .filter(|&i| i < count)
        .map(usize::from)
        .ok_or_else(|| {
            EngineError::Protocol(format!(
                "a message from an unexpected vLLM engine identity {identity:?} (expected \
                 engines {first}..{})",
                u32::from(first) + u32::from(count)
            ))
        })
}

/// Waits for the ready responses of engines `first..first + count` on the input ROUTER
/// until `deadline`; returns each one's identity and response, by index.
pub(super) fn wait_ready_until(
    input: &zmq::Socket,
    first: u16,
    count: u16,
    deadline: Instant,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<Vec<(Vec<u8>, EngineCoreReadyResponse)>, EngineError> {
    let mut responses: Vec<Option<EngineCoreReadyResponse>> = vec![None; usize::from(count)];
    while responses.iter().any(Option::is_none) {
        let present: Vec<bool> = responses.iter().map(Option::is_some).collect();
        let frames = recv_until(input, deadline, cancel).map_err(|e| {
            let stage = "ready response on the input socket";
            missing(e, stage, &present, first, timeout)
        })?;
        let [identity, body] = <[Vec<u8>; 2]>::try_from(frames).map_err(|f| {
            EngineError::Protocol(format!(
                "vLLM ready response: expected [identity, message], got {} frames",
                f.len()
            ))
        })?;
        let slot = slot_of(&identity, first, count)?;
        let response = v::decode_ready_response(&body).map_err(|e| {
            EngineError::Protocol(format!(
                "vLLM engine {}'s ready response: {e}",
                usize::from(first) + slot
            ))
        })?;
        responses[slot] = Some(response);
    }
    Ok(responses
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(i, r)| {
            let index = first + i as u16;
            (vrs_wire::engine_identity(index).to_vec(), r)
        })
        .collect())
}

/// Why nothing came: a timeout names the engines (numbered from `first`) that had not
/// sent `stage`.
fn missing(
    error: EngineError,
    stage: &str,
    present: &[bool],
    first: u16,
    timeout: Duration,
) -> EngineError {
    match error {
        EngineError::Timeout { .. } => {
            let absent: Vec<String> = present
                .iter()
                .enumerate()
                .filter(|(_, p)| !**p)
                .map(|(i, _)| (usize::from(first) + i).to_string())
                .collect();
            EngineError::Setup(format!(
                "vLLM engine(s) {} of {} sent no {stage} within {} s (are they started, \
                 pointed at this frontend, and is the timeout long enough to load the model?)",
                absent.join(", "),
                present.len(),
                timeout.as_secs_f64()
            ))
        }
        other => other,
    }
}

/// The next multipart message on `socket` before `deadline`, polling `cancel` every
/// 100 ms.
fn recv_until(
    socket: &zmq::Socket,
    deadline: Instant,
    cancel: &AtomicBool,
) -> Result<Vec<Vec<u8>>, EngineError> {
    loop {
        if cancel.load(Ordering::SeqCst) {
            return Err(EngineError::Cancelled);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(EngineError::Timeout {
                stage: "vLLM handshake",
                secs: 0.0,
            });
        }
        let slice = (deadline - now).min(Duration::from_millis(100));
        if socket.poll(zmq::POLLIN, slice.as_millis().max(1) as i64)? > 0 {
            return Ok(socket.recv_multipart(0)?);
        }
    }
}
