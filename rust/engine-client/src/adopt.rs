//! Adopting sockets another process bound (`vrs-rs frontend`, run by `vrs frontend`).
//!
//! The parent binds the HTTP listening socket and the two engine listeners as plain
//! sockets, starts and handshakes the engines, then passes the fds on. Here the HTTP fd
//! becomes the tokio listener and the engine fds become the input ROUTER and output PULL
//! through libzmq's `ZMQ_USE_FD` (bind on an already-listening socket). Connections the
//! engines made before vrs-rs ran wait in the kernel's listen queue and are accepted as
//! usual, so each engine's first message (READY on the input socket) is not lost.

use std::ffi::c_int;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use vrs_wire::{HandshakeKind, Ready};

use crate::error::EngineError;
use crate::launcher;

/// The address family an inherited listening socket must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// TCP over IPv4 or IPv6.
    Inet,
    /// AF_UNIX (ZMQ `ipc://`).
    Unix,
}

fn int_option(fd: RawFd, name: c_int) -> std::io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `value`; a bad fd is EBADF.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            (&mut value as *mut c_int).cast(),
            &mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Checks that `fd` (given as `flag`) is an open, listening stream socket of `family`.
pub fn check_listener(fd: RawFd, flag: &str, family: Family) -> Result<(), String> {
    let problem = |what: String| format!("{flag} {fd}: {what}");
    if fd < 0 {
        return Err(problem("not a file descriptor".into()));
    }
    let domain = int_option(fd, libc::SO_DOMAIN).map_err(|e| {
        problem(match e.raw_os_error() {
            Some(libc::EBADF) => "not an open file descriptor (the parent must pass it on, \
                                  e.g. with pass_fds)"
                .into(),
            Some(libc::ENOTSOCK) => "not a socket".into(),
            _ => e.to_string(),
        })
    })?;
    let kind = int_option(fd, libc::SO_TYPE).map_err(|e| problem(e.to_string()))?;
    let listening = int_option(fd, libc::SO_ACCEPTCONN).map_err(|e| problem(e.to_string()))?;
    let family_ok = match family {
        Family::Inet => domain == libc::AF_INET || domain == libc::AF_INET6,
        Family::Unix => domain == libc::AF_UNIX,
    };
    if !family_ok {
        let expected = match family {
            Family::Inet => "a TCP (IPv4/IPv6) socket",
            Family::Unix => "a unix domain socket",
        };
        return Err(problem(format!(
            "expected {expected}, got address family {domain}"
        )));
    }
    if kind != libc::SOCK_STREAM {
        return Err(problem(format!(
            "expected a stream socket, got socket type {kind}"
        )));
    }
    if listening == 0 {
        return Err(problem("the socket is not listening".into()));
    }
    Ok(())
}

/// The path a unix domain socket is bound to.
fn unix_path(fd: RawFd) -> std::io::Result<PathBuf> {
    // SAFETY: an all-zero sockaddr_un is valid; getsockname fills at most `len` bytes.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    let rc =
        unsafe { libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_un).cast(), &mut len) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let bytes: Vec<u8> = addr
        .sun_path
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// Checks that `fd` can become a ZMQ listener for `address` (`ipc://PATH` bound to
/// exactly PATH, or `tcp://...` on a TCP socket).
pub fn check_engine_listener(fd: RawFd, flag: &str, address: &str) -> Result<(), String> {
    if let Some(path) = address.strip_prefix("ipc://") {
        check_listener(fd, flag, Family::Unix)?;
        let bound = unix_path(fd).map_err(|e| format!("{flag} {fd}: {e}"))?;
        if bound != Path::new(path) {
            return Err(format!(
                "{flag} {fd} is bound to {}, not to {address}",
                bound.display()
            ));
        }
        Ok(())
    } else if address.starts_with("tcp://") {
        check_listener(fd, flag, Family::Inet)
    } else {
        Err(format!(
            "{address:?}: an engine address must be ipc://PATH or tcp://HOST:PORT"
        ))
    }
}

fn set_flags(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: fcntl on an fd checked to be an open socket; only flag bits change.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl < 0 || libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd_flags = libc::fcntl(fd, libc::F_GETFD);
        if fd_flags < 0 || libc::fcntl(fd, libc::F_SETFD, fd_flags | libc::FD_CLOEXEC) < 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// An inherited HTTP listening socket: TCP, or a Unix domain socket (`--uds`).
#[derive(Debug)]
pub enum HttpListener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

/// The address family of the socket `fd`, when it is TCP or AF_UNIX.
fn family_of(fd: RawFd) -> Option<Family> {
    match int_option(fd, libc::SO_DOMAIN).ok()? {
        libc::AF_INET | libc::AF_INET6 => Some(Family::Inet),
        libc::AF_UNIX => Some(Family::Unix),
        _ => None,
    }
}

/// Takes over the inherited HTTP listening socket `fd` (checked first): a TCP socket, or
/// a Unix domain socket (the family is read from the socket).
pub fn http_listener(fd: RawFd, flag: &str) -> Result<HttpListener, String> {
    use std::os::fd::FromRawFd;
    let family = if fd >= 0 { family_of(fd) } else { None };
    check_listener(fd, flag, family.unwrap_or(Family::Inet))?;
    set_flags(fd).map_err(|e| format!("{flag} {fd}: {e}"))?;
    let adopted = match family {
        Some(Family::Unix) => {
            // SAFETY: `fd` is an open listening AF_UNIX socket that nothing else in this
            // process uses; the listener owns (and eventually closes) it from here on.
            let std_listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(fd) };
            tokio::net::UnixListener::from_std(std_listener).map(HttpListener::Unix)
        }
        _ => {
            // SAFETY: as above, an open listening TCP socket.
            let std_listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
            tokio::net::TcpListener::from_std(std_listener).map(HttpListener::Tcp)
        }
    };
    adopted.map_err(|e| format!("{flag} {fd}: {e}"))
}

/// A `kind` ZMQ socket listening on the inherited socket `fd`, which is bound to
/// `address` (checked first). libzmq owns the fd from here on.
pub fn zmq_listener(
    ctx: &zmq::Context,
    kind: zmq::SocketType,
    fd: RawFd,
    flag: &str,
    address: &str,
) -> Result<zmq::Socket, EngineError> {
    adopt_zmq(ctx, kind, fd, flag, address, |_| Ok(())).map(|(socket, ())| socket)
}

/// [`zmq_listener`] plus [`watch_disconnects`], watching from before the first accept.
pub fn watched_zmq_listener(
    ctx: &zmq::Context,
    kind: zmq::SocketType,
    fd: RawFd,
    flag: &str,
    address: &str,
) -> Result<(zmq::Socket, mpsc::UnboundedReceiver<String>), EngineError> {
    adopt_zmq(ctx, kind, fd, flag, address, |socket| {
        watch_disconnects(ctx, socket)
    })
}

/// A listening socket inherited from the parent: its fd, the flag that named it (for
/// messages) and the address it is bound to.
pub struct InheritedListener<'a> {
    pub fd: RawFd,
    pub flag: &'a str,
    pub address: &'a str,
}

/// The two engine listeners a parent bound, adopted.
pub struct EngineListeners {
    /// The input ROUTER (engines' DEALERs connect here).
    pub input: zmq::Socket,
    /// The output PULL (engines' PUSHes connect here).
    pub output: zmq::Socket,
    /// Why an engine connection on the input socket closed, as it happens.
    pub lost: mpsc::UnboundedReceiver<String>,
}

/// Adopts the inherited input listener as the ROUTER (watched for engines leaving) and
/// the output listener as the PULL.
pub fn engine_listeners(
    input: InheritedListener<'_>,
    output: InheritedListener<'_>,
) -> Result<EngineListeners, EngineError> {
    let ctx = zmq::Context::new();
    let (input, lost) =
        watched_zmq_listener(&ctx, zmq::ROUTER, input.fd, input.flag, input.address)?;
    let output = zmq_listener(&ctx, zmq::PULL, output.fd, output.flag, output.address)?;
    Ok(EngineListeners {
        input,
        output,
        lost,
    })
}

fn adopt_zmq<T>(
    ctx: &zmq::Context,
    kind: zmq::SocketType,
    fd: RawFd,
    flag: &str,
    address: &str,
    before_bind: impl FnOnce(&zmq::Socket) -> Result<T, EngineError>,
) -> Result<(zmq::Socket, T), EngineError> {
    check_engine_listener(fd, flag, address).map_err(EngineError::Setup)?;
    set_flags(fd)?;
    let mut socket = ctx.socket(kind)?;
    launcher::set_engine_socket_options(&socket)?;
    let value: c_int = fd;
    // SAFETY: the pointer is the live socket `socket` owns; the option value is a c_int
    // and its size is passed with it.
    let rc = unsafe {
        zmq_sys::zmq_setsockopt(
            socket.as_mut_ptr(),
            zmq_sys::ZMQ_USE_FD as c_int,
            (&value as *const c_int).cast(),
            std::mem::size_of::<c_int>(),
        )
    };
    if rc != 0 {
        // SAFETY: reads libzmq's thread-local errno.
        return Err(zmq::Error::from_raw(unsafe { zmq_sys::zmq_errno() }).into());
    }
    let extra = before_bind(&socket)?;
    socket.bind(address)?;
    Ok((socket, extra))
}

/// Waits for READY from engines `first..first + count` on the input ROUTER (each sends
/// it as its first message there); returns each engine's identity and READY in order.
pub fn wait_ready(
    input: &zmq::Socket,
    first: u16,
    count: u16,
    timeout: Duration,
    cancel: &AtomicBool,
) -> Result<Vec<(Vec<u8>, Ready)>, EngineError> {
    let expected: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            first
                .checked_add(i)
                .map(|index| vrs_wire::engine_identity(index).to_vec())
        })
        .collect::<Option<_>>()
        .ok_or_else(|| EngineError::Setup("engine indices beyond 65535".into()))?;
    let mut readies: Vec<Option<Ready>> = vec![None; expected.len()];
    let deadline = Instant::now() + timeout;
    while readies.iter().any(Option::is_none) {
        if cancel.load(Ordering::SeqCst) {
            return Err(EngineError::Cancelled);
        }
        let now = Instant::now();
        if now >= deadline {
            return Err(EngineError::Timeout {
                stage: "READY on the input socket",
                secs: timeout.as_secs_f64(),
            });
        }
        let slice = (deadline - now).min(Duration::from_millis(100));
        if input.poll(zmq::POLLIN, slice.as_millis() as i64)? == 0 {
            continue;
        }
        let frames = input.recv_multipart(0)?;
        let [identity, kind, body] = <[Vec<u8>; 3]>::try_from(frames).map_err(|f| {
            EngineError::Protocol(format!("input READY: expected 3 frames, got {}", f.len()))
        })?;
        if kind != [HandshakeKind::Ready.as_byte()] {
            return Err(EngineError::Protocol(format!(
                "expected READY as an engine's first message, got kind bytes {kind:?}"
            )));
        }
        let slot = expected.iter().position(|e| *e == identity).ok_or_else(|| {
            EngineError::Protocol(format!(
                "READY from an unexpected engine identity {identity:?} (expected engines {first}..{})",
                u32::from(first) + u32::from(count)
            ))
        })?;
        let ready: Ready = vrs_wire::decode(&body)
            .map_err(|e| EngineError::Protocol(format!("input READY: {e}")))?;
        readies[slot] = Some(ready);
    }
    Ok(expected
        .into_iter()
        .zip(readies.into_iter().flatten())
        .collect())
}

/// Reports (once, with the reason) when a peer that completed its ZMTP handshake
/// disconnects from `socket`: with the engines in another process's care, a closed
/// connection is how vrs-rs learns that an engine died. Connections that never finished
/// their handshake (e.g. one an engine gave up on while vrs-rs was not running yet) do
/// not count.
pub fn watch_disconnects(
    ctx: &zmq::Context,
    socket: &zmq::Socket,
) -> Result<mpsc::UnboundedReceiver<String>, EngineError> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let endpoint = format!(
        "inproc://vrs-monitor-{}",
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let failed = [
        zmq::SocketEvent::HANDSHAKE_FAILED_NO_DETAIL.to_raw(),
        zmq::SocketEvent::HANDSHAKE_FAILED_PROTOCOL.to_raw(),
        zmq::SocketEvent::HANDSHAKE_FAILED_AUTH.to_raw(),
    ];
    let disconnected = zmq::SocketEvent::DISCONNECTED.to_raw();
    let events = failed.iter().fold(disconnected, |acc, e| acc | e);
    socket.monitor(&endpoint, i32::from(events))?;
    let monitor = ctx.socket(zmq::PAIR)?;
    monitor.connect(&endpoint)?;
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::Builder::new()
        .name("vrs-engine-monitor".into())
        .spawn(move || {
            // A failed handshake is reported just before its DISCONNECTED (same call,
            // same I/O thread), so "the previous event was a failure" identifies it.
            let mut after_failed_handshake = false;
            while let Ok(frames) = monitor.recv_multipart(0) {
                let Some(head) = frames.first().filter(|f| f.len() >= 2) else {
                    continue;
                };
                let event = u16::from_le_bytes([head[0], head[1]]);
                if failed.contains(&event) {
                    after_failed_handshake = true;
                } else if event == disconnected {
                    if !after_failed_handshake {
                        let _ = tx.send(
                            "the connection to the engine closed (the engine process exited?)"
                                .to_owned(),
                        );
                        return;
                    }
                    after_failed_handshake = false;
                }
            }
        })?;
    Ok(rx)
}

#[cfg(test)]
mod tests;
