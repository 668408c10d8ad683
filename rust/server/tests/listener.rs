//! The HTTP listener on loopback: TLS and mTLS (a rustls client), Unix sockets, and the
//! connection hygiene (slow headers, 431, keep-alive idle close, max_connections,
//! graceful shutdown), each against a real socket and raw HTTP/1.1.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::routing::get;
use axum::Router;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use vrs_server::edge::listener::tls::{self, ClientCerts, TlsFiles};
use vrs_server::edge::listener::{spawn_http, uds, Listener, ServeOptions, ServerTask};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

fn app() -> Router {
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                "done"
            }),
        )
}

struct Server {
    url: String,
    addr: Option<std::net::SocketAddr>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: ServerTask,
}

impl Server {
    async fn start(options: ServeOptions) -> Self {
        let listener = Listener::bind(None, "127.0.0.1", 0).await.unwrap();
        Self::on(listener, options)
    }

    fn on(listener: Listener, options: ServeOptions) -> Self {
        let url = listener.url(options.tls.is_some());
        let addr = listener.local_addr();
        let (stop, task) = spawn_http(listener, app(), options);
        Self {
            url,
            addr,
            stop: Some(stop),
            task,
        }
    }

    async fn tcp(&self) -> TcpStream {
        TcpStream::connect(self.addr.unwrap()).await.unwrap()
    }

    /// Stops accepting and waits (bounded) for the server task to end.
    async fn stop(mut self) {
        drop(self.stop.take());
        tokio::time::timeout(Duration::from_secs(5), &mut self.task)
            .await
            .expect("the server stops within 5 s")
            .unwrap()
            .unwrap();
    }
}

/// Sends `GET path` with `headers` and reads one response: (status, body). The
/// connection stays usable (keep-alive) unless the response closed it.
async fn get_on<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    path: &str,
    headers: &str,
) -> std::io::Result<(u16, String)> {
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}\r\n").as_bytes())
        .await?;
    read_response(stream).await
}

async fn read_response<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<(u16, String)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("closed after {:?}", String::from_utf8_lossy(&buf)),
            ));
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let status: u16 = head[9..12].parse().unwrap();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    Ok((status, String::from_utf8(body).unwrap()))
}

/// Reads until the server closes; how long that took (panics after `limit`).
async fn closed_within<S: AsyncRead + Unpin>(stream: &mut S, limit: Duration) -> Duration {
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout(limit, stream.read(&mut buf)).await {
            Err(_) => panic!("the connection was still open after {limit:?}"),
            Ok(Ok(0)) | Ok(Err(_)) => return start.elapsed(),
            Ok(Ok(_)) => {}
        }
    }
}

// ---- TLS ----

fn tls_options(client_certs: ClientCerts) -> ServeOptions {
    let (cert, key, ca) = (
        fixture("server.pem"),
        fixture("server.key"),
        fixture("ca.pem"),
    );
    let acceptor = tls::acceptor(TlsFiles {
        certfile: &cert,
        keyfile: Some(&key),
        ca_certs: Some(&ca),
        client_certs,
    })
    .unwrap();
    ServeOptions {
        tls: Some(acceptor),
        ..ServeOptions::default()
    }
}

/// A TLS client trusting the test CA, with the client certificate `client` if any.
fn connector(client: Option<&str>) -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let roots = tls::read_roots(&fixture("ca.pem"), "test CA").unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(name) => {
            let certs = CertificateDer::pem_file_iter(fixture(&format!("{name}.pem")))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            let key = PrivateKeyDer::from_pem_file(fixture(&format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(certs, key).unwrap()
        }
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// `GET /health` over TLS as `client`: the status, or the error that stopped it.
async fn https_health(server: &Server, client: Option<&str>) -> Result<u16, String> {
    let tcp = server.tcp().await;
    let name = ServerName::try_from("localhost").unwrap();
    let mut stream = connector(client)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    // With TLS 1.3 a refused client certificate shows on the first read.
    get_on(&mut stream, "/health", "")
        .await
        .map(|(status, _)| status)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn tls_serves_https_to_a_client_that_trusts_the_ca() {
    let server = Server::start(tls_options(ClientCerts::None)).await;
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );
    assert_eq!(https_health(&server, None).await, Ok(200));
    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = server.tcp().await;
    assert!(get_on(&mut plain, "/health", "").await.is_err());
    server.stop().await;
}

#[tokio::test]
async fn mtls_required_refuses_clients_without_a_trusted_certificate() {
    let server = Server::start(tls_options(ClientCerts::Required)).await;
    assert_eq!(https_health(&server, Some("client")).await, Ok(200));
    let without = https_health(&server, None).await;
    assert!(without.is_err(), "no client certificate: {without:?}");
    let untrusted = https_health(&server, Some("other-client")).await;
    assert!(
        untrusted.is_err(),
        "certificate from another CA: {untrusted:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn mtls_optional_takes_no_certificate_but_refuses_an_untrusted_one() {
    let server = Server::start(tls_options(ClientCerts::Optional)).await;
    assert_eq!(https_health(&server, None).await, Ok(200));
    assert_eq!(https_health(&server, Some("client")).await, Ok(200));
    let untrusted = https_health(&server, Some("other-client")).await;
    assert!(
        untrusted.is_err(),
        "certificate from another CA: {untrusted:?}"
    );
    server.stop().await;
}

#[test]
fn bad_tls_files_are_one_clear_error() {
    let files = |cert: &str, key: &str, reqs: ClientCerts, ca: Option<&str>| {
        let (cert, key) = (fixture(cert), fixture(key));
        let ca = ca.map(fixture);
        tls::server_config(TlsFiles {
            certfile: &cert,
            keyfile: Some(&key),
            ca_certs: ca.as_deref(),
            client_certs: reqs,
        })
        .map(|_| ())
    };
    let missing = files("nope.pem", "server.key", ClientCerts::None, None).unwrap_err();
    assert!(
        missing.contains("nope.pem") && missing.contains("--ssl-certfile"),
        "{missing}"
    );
    let not_a_key = files("server.pem", "server.pem", ClientCerts::None, None).unwrap_err();
    assert!(not_a_key.contains("--ssl-keyfile"), "{not_a_key}");
    let mismatch = files("server.pem", "client.key", ClientCerts::None, None).unwrap_err();
    assert!(mismatch.contains("do not go together"), "{mismatch}");
    let no_ca = files("server.pem", "server.key", ClientCerts::Required, None).unwrap_err();
    assert!(no_ca.contains("--ssl-ca-certs"), "{no_ca}");
    let key_as_ca = files(
        "server.pem",
        "server.key",
        ClientCerts::Required,
        Some("server.key"),
    )
    .unwrap_err();
    assert!(key_as_ca.contains("--ssl-ca-certs"), "{key_as_ca}");
    files(
        "server.pem",
        "server.key",
        ClientCerts::Required,
        Some("ca.pem"),
    )
    .unwrap();
}

// ---- Unix sockets ----

#[tokio::test]
async fn uds_serves_http_and_removes_its_socket_file_at_stop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vrs.sock");
    let listener = Listener::bind(Some(path.to_str().unwrap()), "ignored", 0)
        .await
        .unwrap();
    let server = Server::on(listener, ServeOptions::default());
    assert_eq!(server.url, format!("unix:{}", path.display()));
    let mut stream = UnixStream::connect(&path).await.unwrap();
    assert_eq!(
        get_on(&mut stream, "/health", "").await.unwrap(),
        (200, "ok".into())
    );
    drop(stream);
    server.stop().await;
    assert!(!path.exists(), "the socket file is removed at stop");
}

#[tokio::test]
async fn uds_replaces_a_stale_socket_and_refuses_a_live_one_or_a_plain_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vrs.sock");
    // A socket file whose listener is gone: replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let (_listener, file) = uds::bind(&path).unwrap();
    assert_eq!(file.path(), path);
    // Now it is live: a second server must not take it over.
    let err = uds::bind(&path).unwrap_err().to_string();
    assert!(err.contains("another server is listening"), "{err}");
    assert!(path.exists(), "the live socket is left alone");
    drop(file);
    assert!(!path.exists());

    let plain = dir.path().join("notes.txt");
    std::fs::write(&plain, "keep me").unwrap();
    let err = uds::bind(&plain).unwrap_err().to_string();
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep me");
}

#[tokio::test]
async fn tls_over_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tls.sock");
    let listener = Listener::bind(Some(path.to_str().unwrap()), "", 0)
        .await
        .unwrap();
    let server = Server::on(listener, tls_options(ClientCerts::None));
    assert!(server.url.ends_with("(TLS)"), "{}", server.url);
    let unix = UnixStream::connect(&path).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let mut stream = connector(None).connect(name, unix).await.unwrap();
    assert_eq!(get_on(&mut stream, "/health", "").await.unwrap().0, 200);
    drop(stream);
    server.stop().await;
}

// ---- connection hygiene ----

#[tokio::test]
async fn a_half_sent_header_is_closed_at_the_header_timeout_while_others_are_served() {
    let server = Server::start(ServeOptions {
        header_read_timeout: Some(Duration::from_millis(500)),
        ..ServeOptions::default()
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut stream = server.tcp().await;
        stream
            .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(stream);
    }
    let start = Instant::now();
    let mut fast = server.tcp().await;
    assert_eq!(get_on(&mut fast, "/health", "").await.unwrap().0, 200);
    assert!(
        start.elapsed() < Duration::from_millis(400),
        "{:?}",
        start.elapsed()
    );
    for stream in &mut slow {
        let waited = closed_within(stream, Duration::from_secs(3)).await;
        assert!(waited < Duration::from_secs(3));
    }
    // A connection that never sends a byte is closed by the same clock.
    let mut silent = server.tcp().await;
    let waited = closed_within(&mut silent, Duration::from_secs(3)).await;
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    drop(fast);
    server.stop().await;
}

#[tokio::test]
async fn a_header_over_the_limit_gets_431() {
    let server = Server::start(ServeOptions::default()).await;
    let mut stream = server.tcp().await;
    let big = format!("X-Big: {}\r\n", "a".repeat(100 * 1024));
    let (status, _) = get_on(&mut stream, "/health", &big).await.unwrap();
    assert_eq!(status, 431);
    // Just under the limit is fine.
    let mut stream = server.tcp().await;
    let fits = format!("X-Big: {}\r\n", "a".repeat(60 * 1024));
    assert_eq!(get_on(&mut stream, "/health", &fits).await.unwrap().0, 200);
    // A complete head over a small limit too (the read buffer is never below 8 KiB).
    drop(stream);
    server.stop().await;
    let small = Server::start(ServeOptions {
        max_header_size: 1024,
        ..ServeOptions::default()
    })
    .await;
    let mut stream = small.tcp().await;
    let over = format!("X-Big: {}\r\n", "a".repeat(2048));
    assert_eq!(get_on(&mut stream, "/health", &over).await.unwrap().0, 431);
    drop(stream);
    small.stop().await;
}

#[tokio::test]
async fn an_idle_keep_alive_connection_closes_after_the_keep_alive_timeout() {
    let server = Server::start(ServeOptions {
        keep_alive: Duration::from_millis(300),
        ..ServeOptions::default()
    })
    .await;
    let mut stream = server.tcp().await;
    assert_eq!(get_on(&mut stream, "/health", "").await.unwrap().0, 200);
    // Within the timeout the connection is reused.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(get_on(&mut stream, "/health", "").await.unwrap().0, 200);
    // A request slower than the keep-alive timeout is not cut.
    assert_eq!(
        get_on(&mut stream, "/slow", "").await.unwrap(),
        (200, "done".into())
    );
    let waited = closed_within(&mut stream, Duration::from_secs(3)).await;
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    server.stop().await;
}

#[tokio::test]
async fn keep_alive_zero_closes_after_each_response() {
    let server = Server::start(ServeOptions {
        keep_alive: Duration::ZERO,
        ..ServeOptions::default()
    })
    .await;
    let mut stream = server.tcp().await;
    assert_eq!(get_on(&mut stream, "/health", "").await.unwrap().0, 200);
    let waited = closed_within(&mut stream, Duration::from_secs(2)).await;
    assert!(waited < Duration::from_secs(1), "{waited:?}");
    server.stop().await;
}

#[tokio::test]
async fn connections_beyond_max_connections_wait_until_one_closes() {
    let server = Server::start(ServeOptions {
        max_connections: Some(2),
        ..ServeOptions::default()
    })
    .await;
    let mut first = server.tcp().await;
    let mut second = server.tcp().await;
    assert_eq!(get_on(&mut first, "/health", "").await.unwrap().0, 200);
    assert_eq!(get_on(&mut second, "/health", "").await.unwrap().0, 200);
    // The third connects (the kernel's backlog) but is not served while two are open.
    let mut third = server.tcp().await;
    let waiting = tokio::time::timeout(
        Duration::from_millis(500),
        get_on(&mut third, "/health", ""),
    )
    .await;
    assert!(
        waiting.is_err(),
        "served beyond max_connections: {waiting:?}"
    );
    drop(first);
    let (status, _) = tokio::time::timeout(Duration::from_secs(3), read_response(&mut third))
        .await
        .expect("served once a connection closed")
        .unwrap();
    assert_eq!(status, 200);
    drop((second, third));
    server.stop().await;
}

#[tokio::test]
async fn graceful_shutdown_finishes_a_request_in_flight_and_refuses_new_connections() {
    let server = Server::start(ServeOptions::default()).await;
    let addr = server.addr.unwrap();
    let mut busy = server.tcp().await;
    busy.write_all(b"GET /slow HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut idle = server.tcp().await;
    assert_eq!(get_on(&mut idle, "/health", "").await.unwrap().0, 200);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = tokio::spawn(server.stop());
    // The idle connection closes at once, the busy one gets its answer.
    closed_within(&mut idle, Duration::from_secs(1)).await;
    assert_eq!(
        read_response(&mut busy).await.unwrap(),
        (200, "done".into())
    );
    stopping.await.unwrap();
    assert!(TcpStream::connect(addr).await.is_err());
}

// ---- from the http settings ----

#[tokio::test]
async fn an_endpoint_follows_the_http_settings() {
    use vrs_server::args::HttpArgs;
    use vrs_server::lifecycle::endpoint;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edge.sock");
    let text = |p: PathBuf| Some(p.display().to_string());
    let http = HttpArgs {
        ssl_certfile: text(fixture("server.pem")),
        ssl_keyfile: text(fixture("server.key")),
        ssl_ca_certs: text(fixture("ca.pem")),
        ssl_cert_reqs: 2,
        uds: text(path.clone()),
        header_read_timeout: 2.5,
        http_timeout_keep_alive: 1.5,
        max_connections: Some(7),
        h11_max_incomplete_event_size: 4096,
        ..HttpArgs::default()
    };
    http.check().unwrap();
    let bound = endpoint::bind(&http, "127.0.0.1", 0).await.unwrap();
    assert_eq!(bound.url(), format!("unix:{} (TLS)", path.display()));
    let options = &bound.options;
    assert!(options.tls.is_some());
    assert_eq!(
        options.header_read_timeout,
        Some(Duration::from_millis(2500))
    );
    assert_eq!(options.keep_alive, Duration::from_millis(1500));
    assert_eq!(options.max_connections, Some(7));
    assert_eq!(options.max_header_size, 4096);
    let (stop, task) = bound.spawn(app());
    let name = ServerName::try_from("localhost").unwrap();
    let unix = UnixStream::connect(&path).await.unwrap();
    let mut stream = connector(Some("client")).connect(name, unix).await.unwrap();
    assert_eq!(get_on(&mut stream, "/health", "").await.unwrap().0, 200);
    drop((stream, stop));
    task.await.unwrap().unwrap();
    assert!(!path.exists());

    // A key that does not load fails before anything is bound.
    let tcp = HttpArgs {
        ssl_certfile: text(fixture("server.pem")),
        ssl_keyfile: text(fixture("ca.pem")),
        ..HttpArgs::default()
    };
    let err = endpoint::bind(&tcp, "127.0.0.1", 0).await.unwrap_err();
    assert!(err.to_string().contains("--ssl-keyfile"), "{err}");
    let plain = endpoint::bind(&HttpArgs::default(), "127.0.0.1", 0)
        .await
        .unwrap();
    assert!(
        plain.url().starts_with("http://127.0.0.1:"),
        "{}",
        plain.url()
    );
}
