//! The HTTP listener: binding (TCP with a deep backlog, or a Unix socket with `--uds`,
//! in [`uds`]), TLS and mTLS ([`tls`]), and the accept loop: at most `max_connections`
//! connections at once (the rest wait in the kernel's backlog), each served by hyper
//! with the connection hygiene of [`conn`] (header read timeout, keep-alive idle
//! timeout, header size limit → 431), and graceful shutdown (no new connections, open
//! ones finish their requests).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use vrs_engine_client::adopt::HttpListener;

pub mod conn;
pub mod tls;
pub mod uds;

pub use conn::ServeOptions;

/// A bound listener and how its connections are served: what `serve`, `frontend` and
/// `render` set up (from their `http` settings) before anything else starts.
#[derive(Debug)]
pub struct Endpoint {
    pub listener: Listener,
    pub options: ServeOptions,
}

impl Endpoint {
    /// Where clients reach it (see [`Listener::url`]).
    pub fn url(&self) -> String {
        self.listener.url(self.options.tls.is_some())
    }

    /// Serves `app` (see [`spawn_http`]).
    pub fn spawn(self, app: Router) -> (oneshot::Sender<()>, ServerTask) {
        spawn_http(self.listener, app, self.options)
    }
}

/// A bound HTTP listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    /// A Unix socket; `file` removes the socket file when the listener goes, when this
    /// process bound it (an inherited one is the parent's to remove).
    Unix {
        listener: UnixListener,
        file: Option<uds::SocketFile>,
    },
}

impl From<TcpListener> for Listener {
    fn from(listener: TcpListener) -> Self {
        Self::Tcp(listener)
    }
}

impl From<HttpListener> for Listener {
    fn from(adopted: HttpListener) -> Self {
        match adopted {
            HttpListener::Tcp(listener) => Self::Tcp(listener),
            HttpListener::Unix(listener) => Self::Unix {
                listener,
                file: None,
            },
        }
    }
}

impl Listener {
    /// Binds `--uds PATH` when given (see [`uds::bind`]), else TCP on `host:port`.
    pub async fn bind(uds: Option<&str>, host: &str, port: u16) -> anyhow::Result<Self> {
        match uds {
            Some(path) => {
                let (listener, file) = uds::bind(std::path::Path::new(path))?;
                Ok(Self::Unix {
                    listener,
                    file: Some(file),
                })
            }
            None => Ok(Self::Tcp(bind_http(host, port).await?)),
        }
    }

    /// The TCP address, when it is a TCP listener.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        match self {
            Self::Tcp(listener) => listener.local_addr().ok(),
            Self::Unix { .. } => None,
        }
    }

    /// Where clients reach it: `http://HOST:PORT`, `https://HOST:PORT` or `unix:PATH`.
    pub fn url(&self, tls: bool) -> String {
        let scheme = if tls { "https" } else { "http" };
        match self {
            Self::Tcp(listener) => match listener.local_addr() {
                Ok(addr) => format!("{scheme}://{addr}"),
                Err(_) => format!("{scheme}://(unknown address)"),
            },
            Self::Unix { listener, .. } => {
                let path = listener
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                    .unwrap_or_else(|| "(unnamed)".into());
                if tls {
                    format!("unix:{path} (TLS)")
                } else {
                    format!("unix:{path}")
                }
            }
        }
    }

    async fn accept(&self) -> io::Result<Stream> {
        match self {
            Self::Tcp(listener) => {
                let (stream, _) = listener.accept().await?;
                if let Err(e) = stream.set_nodelay(true) {
                    tracing::debug!("cannot set TCP_NODELAY: {e}");
                }
                Ok(Stream::Tcp(stream))
            }
            Self::Unix { listener, .. } => Ok(Stream::Unix(listener.accept().await?.0)),
        }
    }
}

/// Binds the HTTP listener with a deep accept backlog (connections made before the
/// engine is ready wait there).
pub async fn bind_http(host: &str, port: u16) -> anyhow::Result<TcpListener> {
    let addr: SocketAddr = tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve host {host:?}"))?;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket
        .bind(addr)
        .map_err(|e| anyhow::anyhow!("cannot bind http://{addr}: {e}"))?;
    Ok(socket.listen(4096)?)
}

/// One accepted connection, before TLS.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Self::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Self::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Unix(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Tcp(s) => s.is_write_vectored(),
            Self::Unix(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_flush(cx),
            Self::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Self::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

/// The task serving HTTP; it ends when the server stops.
pub type ServerTask = tokio::task::JoinHandle<io::Result<()>>;

/// Serves `app` on `listener` with `options` in a task; sending on (or dropping) the
/// returned channel starts the graceful shutdown: no new connections, idle ones close,
/// busy ones finish their request; the task ends when the last connection has closed.
pub fn spawn_http(
    listener: impl Into<Listener>,
    app: Router,
    options: ServeOptions,
) -> (oneshot::Sender<()>, ServerTask) {
    let listener = listener.into();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(accept_loop(listener, app, options, stop_rx));
    (stop_tx, server)
}

/// Accept errors that concern one connection only (the next accept is fine).
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

async fn accept_loop(
    listener: Listener,
    app: Router,
    options: ServeOptions,
    mut stop: oneshot::Receiver<()>,
) -> io::Result<()> {
    // Connections watch `closing` to start their graceful shutdown; each holds a clone
    // of `alive`, so `gone` yields None once every connection has ended.
    let (closing_tx, closing) = watch::channel(false);
    let (alive, mut gone) = mpsc::channel::<()>(1);
    let limit = options.max_connections.map(|n| Arc::new(Semaphore::new(n)));
    let served = Arc::new(conn::Served::new(app, &options));
    loop {
        // Over the limit, no accept: new connections wait in the kernel's backlog.
        let permit = match &limit {
            Some(limit) => tokio::select! {
                permit = Arc::clone(limit).acquire_owned() => permit.ok(),
                _ = &mut stop => break,
            },
            None => None,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(stream) => stream,
                Err(e) if is_connection_error(&e) => continue,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    tracing::warn!("cannot accept a connection: {e}; retrying in 1 s");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let served = Arc::clone(&served);
        let closing = closing.clone();
        let alive = alive.clone();
        tokio::spawn(async move {
            served.connection(stream, closing).await;
            drop(permit);
            drop(alive);
        });
    }
    drop(listener);
    let _ = closing_tx.send(true);
    drop(alive);
    let _ = gone.recv().await;
    Ok(())
}
