//! The launcher side of the handshake (HELLO → INIT → READY/FAILED, then READY on the
//! input socket) for one engine or a data parallel group; a child of `launcher`.

use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use vrs_wire::{Failed, HandshakeKind, Hello, Init, Ready, PROTOCOL_VERSION};

#[cfg(any(test, feature = "test-util"))]
use super::Connected;
use super::Sockets;
use crate::error::EngineError;

/// Runs the launcher side of the handshake for one engine (see [`handshake_group`]).
#[cfg(any(test, feature = "test-util"))]
pub fn handshake(
    sockets: Sockets,
    exit: watch::Receiver<Option<ExitStatus>>,
    engine_config: rmpv::Value,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<(Connected, tempfile::TempDir), EngineError> {
    let (group, dir) = handshake_group(sockets, 1, vec![exit], engine_config, timeout, cancel)?;
    let Group {
        input,
        output,
        mut engines,
    } = group;
    let (identity, ready) = engines
        .pop()
        .ok_or_else(|| EngineError::Protocol("no engine completed the handshake".into()))?;
    Ok((
        Connected {
            input,
            output,
            identity,
            ready,
        },
        dir,
    ))
}

/// A data parallel group after a successful handshake.
pub struct Group {
    pub input: zmq::Socket,
    pub output: zmq::Socket,
    /// Each engine's identity and READY, by engine index.
    pub engines: Vec<(Vec<u8>, Ready)>,
}

/// Runs the launcher side of the handshake with engines `0..count` (`exits[i]` reports
/// the exit of local engine i; engines beyond `exits` run elsewhere): HELLO → INIT for
/// each as it connects, READY or FAILED from each, then each one's READY on the input
/// socket. Checks `cancel` and the children every 100 ms; every stage is bounded by
/// `timeout`, and a group that times out says which engines are missing.
pub fn handshake_group(
    sockets: Sockets,
    count: usize,
    exits: Vec<watch::Receiver<Option<ExitStatus>>>,
    engine_config: rmpv::Value,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<(Group, tempfile::TempDir), EngineError> {
    let Sockets {
        dir,
        handshake,
        input,
        output,
        input_address,
        output_address,
        ..
    } = sockets;
    let wait = Waiter {
        exits,
        timeout,
        cancel,
    };
    let identities: Vec<Vec<u8>> = (0..count)
        .map(|i| u16::try_from(i).map(|i| vrs_wire::engine_identity(i).to_vec()))
        .collect::<Result<_, _>>()
        .map_err(|_| EngineError::Setup("engine indices beyond 65535".into()))?;
    let slot_of = |identity: &[u8]| {
        identities
            .iter()
            .position(|known| known == identity)
            .ok_or_else(|| {
                EngineError::Protocol(format!(
                    "a message from an unexpected engine identity {identity:?} (expected engines 0..{count})"
                ))
            })
    };
    let init = Init {
        input_address,
        output_address,
        engine_config,
    };
    let init = vrs_wire::encode(&init).map_err(|e| EngineError::Protocol(e.to_string()))?;
    let mut readies: Vec<Option<Ready>> = vec![None; count];
    let mut greeted = vec![false; count];
    while readies.iter().any(Option::is_none) {
        let stage = if greeted.iter().all(|g| *g) {
            "READY"
        } else {
            "HELLO"
        };
        let frames = wait.message(&handshake, stage).map_err(|e| {
            let present: Vec<bool> = if stage == "HELLO" {
                greeted.clone()
            } else {
                readies.iter().map(Option::is_some).collect()
            };
            name_missing(e, count, &present)
        })?;
        let [identity, kind, body] = three(frames, "handshake")?;
        let slot = slot_of(&identity)?;
        match kind.first().copied().map(HandshakeKind::try_from) {
            Some(Ok(HandshakeKind::Hello)) => {
                let hello: Hello = decode(&body, "HELLO")?;
                if hello.protocol_version != PROTOCOL_VERSION {
                    return Err(EngineError::Protocol(format!(
                        "engine speaks protocol version {}, vrs-rs speaks {PROTOCOL_VERSION}; install matching versions",
                        hello.protocol_version
                    )));
                }
                tracing::info!(
                    pid = hello.pid,
                    "engine {} connected; loading",
                    hello.engine_index
                );
                handshake.send(&identity[..], zmq::SNDMORE)?;
                handshake.send(&[HandshakeKind::Init.as_byte()][..], zmq::SNDMORE)?;
                handshake.send(&init[..], 0)?;
                greeted[slot] = true;
            }
            Some(Ok(HandshakeKind::Ready)) => readies[slot] = Some(decode(&body, "READY")?),
            Some(Ok(HandshakeKind::Failed)) => {
                let failed: Failed = decode(&body, "FAILED")?;
                return Err(EngineError::Failed(if count == 1 {
                    failed.message
                } else {
                    format!("engine {slot}: {}", failed.message)
                }));
            }
            _ => {
                return Err(EngineError::Protocol(format!(
                    "expected HELLO, READY or FAILED, got {kind:?}"
                )))
            }
        }
    }
    let mut seen = vec![false; count];
    while seen.iter().any(|s| !s) {
        let frames = wait
            .message(&input, "READY on the input socket")
            .map_err(|e| name_missing(e, count, &seen))?;
        let [identity, kind, body] = three(frames, "input READY")?;
        expect_kind(&kind, HandshakeKind::Ready)?;
        let _: Ready = decode(&body, "input READY")?;
        seen[slot_of(&identity)?] = true;
    }
    let engines = identities
        .into_iter()
        .zip(readies.into_iter().flatten())
        .collect();
    Ok((
        Group {
            input,
            output,
            engines,
        },
        dir,
    ))
}

/// A group's timeout, naming the engines that had not answered.
fn name_missing(error: EngineError, count: usize, present: &[bool]) -> EngineError {
    match error {
        EngineError::Timeout { stage, secs } if count > 1 => EngineError::Setup(format!(
            "engine(s) {} of {count} sent no {stage} within {secs} s (a remote engine joins \
             with `vrs serve MODEL --headless --handshake-address ... --engine-index I`; \
             raise VRS_ENGINE_READY_TIMEOUT_S for slow starts)",
            missing(count, present)
        )),
        other => other,
    }
}

struct Waiter<'a> {
    exits: Vec<watch::Receiver<Option<ExitStatus>>>,
    timeout: Duration,
    cancel: &'a AtomicBool,
}

impl Waiter<'_> {
    /// The next multipart message on `socket`, or why none came.
    fn message(
        &self,
        socket: &zmq::Socket,
        stage: &'static str,
    ) -> Result<Vec<Vec<u8>>, EngineError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                return Err(EngineError::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(EngineError::Timeout {
                    stage,
                    secs: self.timeout.as_secs_f64(),
                });
            }
            let slice = (deadline - now).min(Duration::from_millis(100));
            if socket.poll(zmq::POLLIN, slice.as_millis() as i64)? > 0 {
                return Ok(socket.recv_multipart(0)?);
            }
            let exited = self
                .exits
                .iter()
                .enumerate()
                .find_map(|(i, exit)| exit.borrow().map(|status| (i, status)));
            if let Some((engine, status)) = exited {
                // What it said last (a FAILED) is worth more than its exit code.
                if socket.poll(zmq::POLLIN, 200)? > 0 {
                    return Ok(socket.recv_multipart(0)?);
                }
                if self.exits.len() == 1 {
                    return Err(EngineError::Exited { stage, status });
                }
                return Err(EngineError::Setup(format!(
                    "engine {engine}'s process exited ({status}) while vrs-rs waited for its {stage}"
                )));
            }
        }
    }
}

fn three(frames: Vec<Vec<u8>>, stage: &str) -> Result<[Vec<u8>; 3], EngineError> {
    let n = frames.len();
    <[Vec<u8>; 3]>::try_from(frames)
        .map_err(|_| EngineError::Protocol(format!("{stage}: expected 3 frames, got {n}")))
}

fn expect_kind(kind: &[u8], expected: HandshakeKind) -> Result<(), EngineError> {
    if kind == [expected.as_byte()] {
        Ok(())
    } else {
        Err(EngineError::Protocol(format!(
            "expected {expected:?}, got kind bytes {kind:?}"
        )))
    }
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, EngineError> {
    vrs_wire::decode(body).map_err(|e| EngineError::Protocol(format!("{what}: {e}")))
}

/// The indices in `0..count` not in `present`, as "1, 3" (for "who is missing").
fn missing(count: usize, present: &[bool]) -> String {
    let names: Vec<String> = (0..count)
        .filter(|&i| !present.get(i).copied().unwrap_or(false))
        .map(|i| i.to_string())
        .collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_names_the_absent() {
        assert_eq!(missing(4, &[true, false, true, false]), "1, 3");
        assert_eq!(missing(2, &[true]), "1");
        assert_eq!(missing(1, &[true]), "");
    }
}
