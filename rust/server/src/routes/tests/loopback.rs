//! The serving router behind the real listener, over TCP on loopback.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::edge::listener::{bind_http, spawn_http, ServeOptions, ServerTask};
use crate::routes::router;
use crate::testutil::{events, json_of, Harness};

/// `h`'s serving router behind the real listener on a loopback port: its address, the
/// channel that stops it and its task.
pub(super) async fn serve(
    h: &Harness,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    ServerTask,
) {
    let listener = bind_http("127.0.0.1", 0).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(Arc::clone(&h.state));
    let (stop, server) = spawn_http(listener, app, ServeOptions::default());
    (addr, stop, server)
}

/// One HTTP/1.1 request over a real TCP connection (`Connection: close`): the status
/// line's code and the body (de-chunked).
async fn over_tcp(addr: std::net::SocketAddr, path: &str, body: &str) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let raw = tokio::task::spawn_blocking(move || {
        let mut tcp = std::net::TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        tcp.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        tcp.read_to_end(&mut raw).unwrap();
        raw
    })
    .await
    .unwrap();
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap();
    let mut rest = &raw[split + 4..];
    if !head.contains("transfer-encoding: chunked") {
        return (status, rest.to_vec());
    }
    let mut body = Vec::new();
    loop {
        let line_end = rest.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..line_end]).unwrap(), 16).unwrap();
        if size == 0 {
            return (status, body);
        }
        body.extend_from_slice(&rest[line_end + 2..line_end + 2 + size]);
        rest = &rest[line_end + 4 + size..];
    }
}

#[tokio::test]
async fn batched_echo_over_real_http_on_loopback() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let (addr, stop, server) = serve(&h).await;
    let body = json!({"prompt": ["hello", "world"], "n": 2, "max_tokens": 2, "echo": true,
                      "logprobs": 0});
    let (status, bytes) = over_tcp(addr, "/v1/completions", &body.to_string()).await;
    assert_eq!(status, 200);
    let v = json_of(&bytes);
    let texts: Vec<&str> = v["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "hello foo bar",
            "hello foo bar",
            "world foo bar",
            "world foo bar"
        ]
    );
    assert_eq!(
        v["choices"][2]["logprobs"]["tokens"],
        json!(["world", "foo", "bar"])
    );
    assert_eq!(v["usage"]["prompt_tokens"], 2);
    let mut body = body;
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true, "continuous_usage_stats": true});
    let (status, bytes) = over_tcp(addr, "/v1/completions", &body.to_string()).await;
    assert_eq!(status, 200);
    let evs = events(&bytes);
    let (last, chunks) = evs.split_last().unwrap();
    assert!(chunks.iter().all(|e| e["usage"]["prompt_tokens"] == 1));
    assert_eq!(last["usage"]["completion_tokens"], 8);
    let _ = stop.send(());
    server.await.unwrap().unwrap();
}
