//! The HTTP listener: binding with a deep backlog, and the serving task with graceful
//! shutdown.

use std::net::SocketAddr;

use axum::serve::ListenerExt;
use axum::Router;

/// Binds the HTTP listener with a deep accept backlog (connections made before the
/// engine is ready wait there).
pub async fn bind_http(host: &str, port: u16) -> anyhow::Result<tokio::net::TcpListener> {
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

/// The task serving HTTP; it ends when the server stops.
pub type ServerTask = tokio::task::JoinHandle<std::io::Result<()>>;

/// Serves `app` on `listener` (TCP_NODELAY on every connection) in a task; sending on the
/// returned channel starts the graceful shutdown (no new connections, open ones finish).
pub fn spawn_http(
    listener: tokio::net::TcpListener,
    app: Router,
) -> (tokio::sync::oneshot::Sender<()>, ServerTask) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let listener = listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("cannot set TCP_NODELAY: {e}");
            }
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.await;
            })
            .await
    });
    (stop_tx, server)
}
