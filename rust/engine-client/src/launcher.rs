//! Starting and supervising the engine process: bind the three sockets in a private
//! directory, spawn `python -m engine --headless` in its own process group, run the
//! handshake (HELLO → INIT → READY/FAILED, then READY on the input socket), and later
//! stop the whole group.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::EngineError;
#[cfg(any(test, feature = "test-util"))]
use vrs_wire::Ready;

/// The frontend's three bound sockets and the private directory holding them.
pub struct Sockets {
    pub dir: tempfile::TempDir,
    pub handshake: zmq::Socket,
    pub input: zmq::Socket,
    pub output: zmq::Socket,
    pub handshake_address: String,
    pub input_address: String,
    pub output_address: String,
}

/// The engine after a successful handshake (one engine; tests).
#[cfg(any(test, feature = "test-util"))]
pub struct Connected {
    pub input: zmq::Socket,
    pub output: zmq::Socket,
    pub identity: Vec<u8>,
    pub ready: Ready,
}

/// Binds handshake ROUTER, input ROUTER and output PULL on ipc:// paths in a new
/// private (0700) temporary directory.
pub fn bind_sockets() -> Result<Sockets, EngineError> {
    let dir = tempfile::Builder::new().prefix("vrs-").tempdir()?;
    let ctx = zmq::Context::new();
    let address = |name: &str| format!("ipc://{}/{name}", dir.path().display());
    let handshake_address = address("handshake");
    // sun_path holds 107 bytes: refuse a TMPDIR too long for it with a clear message.
    if handshake_address.len() - "ipc://".len() > 100 {
        return Err(EngineError::Protocol(format!(
            "temporary directory path {:?} is too long for ipc sockets; set TMPDIR to a shorter one",
            dir.path()
        )));
    }
    let handshake = ctx.socket(zmq::ROUTER)?;
    let input = ctx.socket(zmq::ROUTER)?;
    let output = ctx.socket(zmq::PULL)?;
    for socket in [&handshake, &input, &output] {
        set_engine_socket_options(socket)?;
    }
    let input_address = address("input");
    let output_address = address("output");
    handshake.bind(&handshake_address)?;
    input.bind(&input_address)?;
    output.bind(&output_address)?;
    Ok(Sockets {
        dir,
        handshake,
        input,
        output,
        handshake_address,
        input_address,
        output_address,
    })
}

/// Options of every frontend-side engine socket: no linger, no high-water mark, and a
/// ROUTER refuses to send to an unknown (gone) engine instead of dropping silently.
pub fn set_engine_socket_options(socket: &zmq::Socket) -> Result<(), zmq::Error> {
    socket.set_linger(0)?;
    socket.set_sndhwm(0)?;
    socket.set_rcvhwm(0)?;
    if socket.get_socket_type()? == zmq::ROUTER {
        socket.set_router_mandatory(true)?;
    }
    Ok(())
}

/// Starts the headless engine in its own process group. Must run on a thread that lives
/// as long as the process (the main thread): the child's parent-death signal fires when
/// the spawning thread exits.
pub fn spawn_engine(
    python: &str,
    handshake_address: &str,
    engine_index: u16,
    log_level: &str,
) -> Result<Child, EngineError> {
    let mut command = Command::new(python);
    command
        .args([
            "-m",
            "engine",
            "--headless",
            "--handshake-address",
            handshake_address,
        ])
        .args(["--engine-index", &engine_index.to_string()])
        .stdin(Stdio::null());
    if std::env::var_os("VRS_LOG_LEVEL").is_none() {
        command.env("VRS_LOG_LEVEL", log_level);
    }
    own_process_group(&mut command);
    command
        .spawn()
        .map_err(|e| EngineError::Spawn(format!("{python} -m engine"), e))
}

/// Makes the child of `command` lead its own process group (stopped as a group) and get
/// SIGTERM when the spawning thread exits (its parent-death signal), so that an engine
/// never outlives vrs-rs.
pub fn own_process_group(command: &mut Command) {
    let parent = std::process::id();
    // SAFETY: only async-signal-safe libc calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Each stage's bound: `VRS_ENGINE_READY_TIMEOUT_S`, default 600 s.
pub fn ready_timeout() -> Duration {
    std::env::var("VRS_ENGINE_READY_TIMEOUT_S")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v > 0.0)
        .map_or(Duration::from_secs(600), Duration::from_secs_f64)
}

mod handshake;
#[cfg(any(test, feature = "test-util"))]
pub use handshake::handshake;
pub use handshake::handshake_group;

/// JSON engine settings as the msgpack map INIT carries.
pub fn json_to_msgpack(value: &serde_json::Value) -> rmpv::Value {
    use serde_json::Value as J;
    match value {
        J::Null => rmpv::Value::Nil,
        J::Bool(b) => rmpv::Value::Boolean(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => rmpv::Value::from(i),
            (None, Some(u)) => rmpv::Value::from(u),
            _ => rmpv::Value::F64(n.as_f64().unwrap_or(f64::NAN)),
        },
        J::String(s) => rmpv::Value::from(s.as_str()),
        J::Array(items) => rmpv::Value::Array(items.iter().map(json_to_msgpack).collect()),
        J::Object(map) => rmpv::Value::Map(
            map.iter()
                .map(|(k, v)| (rmpv::Value::from(k.as_str()), json_to_msgpack(v)))
                .collect(),
        ),
    }
}

/// The running engine process group.
pub struct EngineProcess {
    pid: i32,
    exit: watch::Receiver<Option<ExitStatus>>,
}

impl EngineProcess {
    /// Watches `child` from a dedicated thread that reaps it when it exits.
    pub fn supervise(mut child: Child) -> std::io::Result<Self> {
        let pid = child.id() as i32;
        let (tx, exit) = watch::channel(None);
        std::thread::Builder::new()
            .name("vrs-engine-wait".into())
            .spawn(move || {
                if let Ok(status) = child.wait() {
                    let _ = tx.send(Some(status));
                }
            })?;
        Ok(Self { pid, exit })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The exit status as it becomes known (for code outside the runtime).
    pub fn exit_receiver(&self) -> watch::Receiver<Option<ExitStatus>> {
        self.exit.clone()
    }

    /// Resolves when the engine process exits.
    pub async fn exited(&self) -> ExitStatus {
        let mut exit = self.exit.clone();
        loop {
            if let Some(status) = *exit.borrow_and_update() {
                return status;
            }
            if exit.changed().await.is_err() {
                // The waiter thread is gone without a status: waitpid failed.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Sends `signal` to every process of the engine's group.
    pub fn signal_group(&self, signal: libc::c_int) {
        // SAFETY: plain syscall; ESRCH (group already gone) is fine.
        unsafe {
            libc::killpg(self.pid, signal);
        }
    }

    /// SIGTERM the group, SIGKILL whatever is left after `grace`.
    pub async fn stop(&self, grace: Duration) -> Option<ExitStatus> {
        self.signal_group(libc::SIGTERM);
        let status = tokio::time::timeout(grace, self.exited()).await.ok();
        if status.is_none() {
            tracing::warn!("engine did not stop within {grace:?}; killing it");
        }
        // Stragglers of the group (the engine's own children) go too.
        self.signal_group(libc::SIGKILL);
        match status {
            Some(s) => Some(s),
            None => tokio::time::timeout(Duration::from_secs(2), self.exited())
                .await
                .ok(),
        }
    }
}

#[cfg(test)]
mod tests;
