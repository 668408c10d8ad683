//! Kept-alive connections after answers that do not need the request's body (404, 405,
//! the API key's 401), over TCP on loopback: the body is read (here sent 20 ms after the
//! head, once the answer could be out) and the connection serves the next request; a
//! route that leaves a body unread says `Connection: close`. Python:
//! tests/server/test_keep_alive.py; both end to end: tests/e2e/test_keep_alive.py.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::state::HttpOptions;
use crate::testutil::Harness;

/// An answer: its status and head (lower case).
struct Answer {
    status: u16,
    head: String,
}

impl Answer {
    fn closes(&self) -> bool {
        self.head.contains("\r\nconnection: close")
    }
}

/// One request on the kept-alive `tcp`, the body `pause` after the head; its answer (an
/// error when the server closed the connection instead).
fn exchange(
    tcp: &mut TcpStream,
    request: (&str, &str, &[(&str, &str)]),
    body: &str,
    pause: Duration,
) -> io::Result<Answer> {
    let (method, path, headers) = request;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n{extra}\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes())?;
    if !pause.is_zero() {
        std::thread::sleep(pause);
    }
    tcp.write_all(body.as_bytes())?;
    let mut raw = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let length: usize = head
                .split("\r\n")
                .find_map(|line| line.strip_prefix("content-length: "))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or(0);
            if raw.len() >= end + 4 + length {
                let status = head[9..12].parse().unwrap_or(0);
                return Ok(Answer { status, head });
            }
        }
        let n = tcp.read(&mut chunk)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the server closed the connection without an answer",
            ));
        }
        raw.extend_from_slice(&chunk[..n]);
    }
}

/// A server with `options` on a loopback port; `client` runs against it on a thread of
/// its own, then the server stops.
async fn with_server(
    options: HttpOptions,
    client: impl FnOnce(SocketAddr) -> io::Result<()> + Send + 'static,
) {
    let h = Harness::with_options(vec![5, 6], Duration::ZERO, options);
    let (addr, stop, server) = super::loopback::serve(&h).await;
    tokio::task::spawn_blocking(move || client(addr))
        .await
        .unwrap()
        .unwrap();
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}

fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(tcp)
}

const CHAT: &str = r#"{"messages": [{"role": "user", "content": "hi hi hi hi hi hi"}]}"#;

#[tokio::test]
async fn error_answers_keep_the_connection() {
    with_server(HttpOptions::default(), |addr| {
        let mut tcp = connect(addr)?;
        for i in 0..6 {
            let pause = Duration::from_millis(if i % 2 == 1 { 20 } else { 0 });
            let missing = exchange(&mut tcp, ("POST", "/v1/no-such-route", &[]), CHAT, pause)?;
            assert_eq!(
                (missing.status, missing.closes()),
                (404, false),
                "{}",
                missing.head
            );
            let wrong = exchange(&mut tcp, ("POST", "/v1/models", &[]), CHAT, pause)?;
            assert_eq!(
                (wrong.status, wrong.closes()),
                (405, false),
                "{}",
                wrong.head
            );
            let good = exchange(&mut tcp, ("GET", "/v1/models", &[]), "", Duration::ZERO)?;
            assert_eq!((good.status, good.closes()), (200, false), "{}", good.head);
        }
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn unauthorized_reads_the_body_and_keeps_the_connection() {
    let options = HttpOptions {
        api_key: Some("k".into()),
        ..HttpOptions::default()
    };
    with_server(options, |addr| {
        let mut tcp = connect(addr)?;
        let auth: &[(&str, &str)] = &[("authorization", "Bearer k")];
        for pause in [0, 20, 0, 20] {
            let pause = Duration::from_millis(pause);
            let refused = exchange(&mut tcp, ("POST", "/v1/chat/completions", &[]), CHAT, pause)?;
            assert_eq!(
                (refused.status, refused.closes()),
                (401, false),
                "{}",
                refused.head
            );
            let good = exchange(&mut tcp, ("GET", "/v1/models", auth), "", Duration::ZERO)?;
            assert_eq!((good.status, good.closes()), (200, false), "{}", good.head);
        }
        Ok(())
    })
    .await;
}

#[tokio::test]
async fn a_body_left_unread_closes_the_connection_with_a_word() {
    // A route that reads no body (`POST /ping`, the health check) answers before a late
    // body arrives: the answer says `Connection: close`, and the connection ends, rather
    // than ending unannounced.
    with_server(HttpOptions::default(), |addr| {
        let mut tcp = connect(addr)?;
        let pause = Duration::from_millis(20);
        let ping = exchange(&mut tcp, ("POST", "/ping", &[]), CHAT, pause)?;
        assert_eq!((ping.status, ping.closes()), (200, true), "{}", ping.head);
        let mut rest = Vec::new();
        assert_eq!(
            tcp.read_to_end(&mut rest).unwrap_or(0),
            0,
            "nothing after the answer"
        );
        Ok(())
    })
    .await;
}
