//! One connection's life: the TLS handshake (bounded by the header read timeout), then
//! HTTP/1.1 by hyper with
//! - a header read timeout (hyper's, on its tokio timer): a request head not complete
//!   that long after hyper started waiting for it closes the connection; hyper starts
//!   that clock before the first byte, on a new connection and on an idle keep-alive
//!   one alike;
//! - a keep-alive idle timeout: a connection with no request in flight that has read
//!   nothing for that long since its last response ends ([`IdleIo`] reports end of
//!   input, which hyper takes as the client closing an idle connection); 0 turns
//!   keep-alive off (one request per connection);
//! - a request head size limit: larger heads are answered 431 and the connection closes;
//! - graceful shutdown on the accept loop's signal: an idle connection closes at once, a
//!   busy one after its response;
//! - a response to a request whose body was not read to its end (a 413, a 401 or 429
//!   answered before the body, any handler that leaves it) says `Connection: close`:
//!   hyper cannot always skip an unread body, and a kept-alive connection it drops
//!   without saying so fails the client's next request on it ([`WatchedBody`]).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderValue};
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use super::Stream;

/// hyper's smallest read buffer; the head size limit below it is checked on complete heads.
const MIN_BUF_SIZE: usize = 8192;

/// How connections are served (from `HttpArgs`; [`Default`]: vLLM's defaults, no TLS).
#[derive(Clone)]
pub struct ServeOptions {
    /// TLS (and client certificates) when set.
    pub tls: Option<TlsAcceptor>,
    /// How long a client may take to send a request head (and the TLS handshake);
    /// `None`: no limit.
    pub header_read_timeout: Option<Duration>,
    /// How long an idle keep-alive connection stays open; zero: no keep-alive.
    pub keep_alive: Duration,
    /// Connections served at once; `None`: no limit.
    pub max_connections: Option<usize>,
    /// Largest request head (request line and headers) in bytes; larger ones get 431.
    pub max_header_size: usize,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            tls: None,
            header_read_timeout: Some(Duration::from_secs(10)),
            keep_alive: Duration::from_secs(5),
            max_connections: None,
            max_header_size: 65536,
        }
    }
}

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("tls", &self.tls.is_some())
            .field("header_read_timeout", &self.header_read_timeout)
            .field("keep_alive", &self.keep_alive)
            .field("max_connections", &self.max_connections)
            .field("max_header_size", &self.max_header_size)
            .finish()
    }
}

/// What every connection of one listener shares.
pub(crate) struct Served {
    app: Router,
    builder: http1::Builder,
    tls: Option<TlsAcceptor>,
    handshake_timeout: Option<Duration>,
    keep_alive: Duration,
}

impl Served {
    pub(crate) fn new(app: Router, options: &ServeOptions) -> Self {
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(options.header_read_timeout)
            .keep_alive(!options.keep_alive.is_zero())
            .max_buf_size(options.max_header_size.max(MIN_BUF_SIZE))
            .max_header_size(options.max_header_size);
        Self {
            app,
            builder,
            tls: options.tls.clone(),
            handshake_timeout: options.header_read_timeout,
            keep_alive: options.keep_alive,
        }
    }

    /// Serves one accepted connection to its end.
    pub(crate) async fn connection(&self, stream: Stream, mut closing: watch::Receiver<bool>) {
        let Some(acceptor) = &self.tls else {
            return self.http(stream, closing).await;
        };
        let handshake = acceptor.accept(stream);
        let handshake = async {
            match self.handshake_timeout {
                Some(limit) => tokio::time::timeout(limit, handshake)
                    .await
                    .unwrap_or_else(|_| {
                        Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no TLS handshake within the header read timeout",
                        ))
                    }),
                None => handshake.await,
            }
        };
        let stream = tokio::select! {
            done = handshake => match done {
                Ok(stream) => stream,
                Err(e) => {
                    tracing::debug!("TLS handshake failed: {e}");
                    return;
                }
            },
            _ = closing.wait_for(|closing| *closing) => return,
        };
        self.http(stream, closing).await
    }

    async fn http<S>(&self, stream: S, mut closing: watch::Receiver<bool>)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let activity = Arc::new(Activity::default());
        let io = TokioIo::new(IdleIo {
            inner: stream,
            keep_alive: self.keep_alive,
            activity: Arc::clone(&activity),
            idle: None,
        });
        let service = AppService {
            app: self.app.clone(),
            activity,
        };
        let conn = self.builder.serve_connection(io, service);
        tokio::pin!(conn);
        let mut shutting_down = false;
        loop {
            tokio::select! {
                done = conn.as_mut() => {
                    if let Err(e) = done {
                        tracing::debug!("connection closed: {e}");
                    }
                    return;
                }
                _ = closing.wait_for(|closing| *closing), if !shutting_down => {
                    shutting_down = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// Requests in flight on one connection, and whether the last one just finished.
#[derive(Default)]
struct Activity {
    in_flight: AtomicUsize,
    finished: AtomicBool,
}

/// A request in flight; dropped when its response body is dropped (written or not).
struct Busy(Arc<Activity>);

impl Busy {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::AcqRel);
        Self(Arc::clone(activity))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.finished.store(true, Ordering::Release);
        }
    }
}

/// The router as hyper's service; each response body carries its [`Busy`].
struct AppService {
    app: Router,
    activity: Arc<Activity>,
}

type ResponseFuture =
    Pin<Box<dyn Future<Output = Result<Response<TrackedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for AppService {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = ResponseFuture;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let busy = Busy::new(&self.activity);
        let ended = Arc::new(AtomicBool::new(false));
        let request = request.map(|body| Body::new(WatchedBody::new(body, Arc::clone(&ended))));
        // The router is always ready (axum's `Router::poll_ready` is `Ready(Ok(()))`).
        let mut app = self.app.clone();
        let response = tower_service::Service::call(&mut app, request);
        Box::pin(async move {
            let mut response = response.await?;
            if !ended.load(Ordering::Acquire) {
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            Ok(response.map(|body| TrackedBody { body, _busy: busy }))
        })
    }
}

/// A request body that records when it has been read to its end (at once for a request
/// without one). Its response, made without reading it all, closes the connection.
struct WatchedBody {
    body: Incoming,
    ended: Arc<AtomicBool>,
}

impl WatchedBody {
    fn new(body: Incoming, ended: Arc<AtomicBool>) -> Self {
        if http_body::Body::is_end_stream(&body) {
            ended.store(true, Ordering::Release);
        }
        Self { body, ended }
    }
}

impl http_body::Body for WatchedBody {
    type Data = bytes::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.body).poll_frame(cx);
        let done = match &polled {
            Poll::Ready(None) => true,
            Poll::Ready(Some(Ok(_))) => http_body::Body::is_end_stream(&this.body),
            _ => false,
        };
        if done {
            this.ended.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A response body that marks its request finished when hyper drops it.
struct TrackedBody {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for TrackedBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The connection's stream with the keep-alive idle timeout: once no request is in
/// flight, a read still pending `keep_alive` after the last response reports end of
/// input. Any byte read, or a request starting, cancels it.
struct IdleIo<S> {
    inner: S,
    keep_alive: Duration,
    activity: Arc<Activity>,
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: AsyncRead + Unpin> AsyncRead for IdleIo<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.activity.finished.swap(false, Ordering::AcqRel) && !this.keep_alive.is_zero() {
            let deadline = tokio::time::Instant::now() + this.keep_alive;
            match &mut this.idle {
                Some(sleep) => sleep.as_mut().reset(deadline),
                None => this.idle = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        if this.activity.in_flight.load(Ordering::Acquire) > 0 {
            this.idle = None;
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    this.idle = None;
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                let expired = match &mut this.idle {
                    Some(sleep) => sleep.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if expired {
                    this.idle = None;
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Pending
                }
            }
            ready => ready,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for IdleIo<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
