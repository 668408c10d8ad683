//! The supervisor-owned start (`VLLM_USE_RUST_FRONTEND=1 vllm serve`): vLLM's process
//! manager bound the input ROUTER and output PULL listeners
//! (`bind_engine_zmq_listeners`), ran HELLO/READY with the engines itself, and runs the
//! frontend with the listeners' fds (`--input-listener-fd`, `--output-listener-fd`).
//! The frontend adopts them ([`crate::adopt::engine_listeners`], with the addresses from
//! [`listener_address`]) and waits here for each engine's `EngineCoreReadyResponse`,
//! its first message on the input socket.

use std::os::fd::RawFd;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use vrs_wire::vllm::EngineCoreReadyResponse;

use crate::error::EngineError;

/// Waits for the ready responses of engines `first..first + count` on the adopted
/// input ROUTER; returns each one's identity and response, by engine index. A timeout
/// names the engines that sent none; `cancel` ends the wait early.
pub fn wait_ready(
    input: &zmq::Socket,
    first: u16,
    count: u16,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<Vec<(Vec<u8>, EngineCoreReadyResponse)>, EngineError> {
    if count == 0 || first.checked_add(count - 1).is_none() {
        return Err(EngineError::Setup(format!(
            "engine start index {first} and count {count}: need 1..=65536 engines within \
             indices 0..=65535"
        )));
    }
    let deadline = Instant::now() + timeout;
    super::handshake::wait_ready_until(input, first, count, deadline, timeout, cancel)
}

/// The ZMQ address an inherited listening socket is bound to: `tcp://IP:PORT` for
/// TCP, `ipc://PATH` for a unix domain socket (for [`crate::adopt::InheritedListener`]).
pub fn listener_address(fd: RawFd, flag: &str) -> Result<String, EngineError> {
    let problem = |what: String| EngineError::Setup(format!("{flag} {fd}: {what}"));
    // SAFETY: an all-zero sockaddr_storage is valid; getsockname writes at most `len`
    // bytes into it; a bad fd is an error return.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockname(
            fd,
            (&mut storage as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(problem(std::io::Error::last_os_error().to_string()));
    }
    match i32::from(storage.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a: libc::sockaddr_in =
                unsafe { std::ptr::read((&storage as *const libc::sockaddr_storage).cast()) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Ok(format!("tcp://{ip}:{}", u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a: libc::sockaddr_in6 =
                unsafe { std::ptr::read((&storage as *const libc::sockaddr_storage).cast()) };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Ok(format!("tcp://[{ip}]:{}", u16::from_be(a.sin6_port)))
        }
        libc::AF_UNIX => {
            // SAFETY: the family says the storage holds a sockaddr_un.
            let a: libc::sockaddr_un =
                unsafe { std::ptr::read((&storage as *const libc::sockaddr_storage).cast()) };
            let bytes: Vec<u8> = a
                .sun_path
                .iter()
                .take_while(|&&c| c != 0)
                .map(|&c| c as u8)
                .collect();
            if bytes.is_empty() {
                return Err(problem(
                    "an unnamed or abstract unix socket has no ipc:// path".into(),
                ));
            }
            let path = String::from_utf8(bytes)
                .map_err(|_| problem("the unix socket path is not UTF-8".into()))?;
            Ok(format!("ipc://{path}"))
        }
        family => Err(problem(format!(
            "address family {family} is neither TCP nor a unix socket"
        ))),
    }
}
