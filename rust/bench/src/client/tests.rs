//! Unit tests of `client.rs`.

use super::*;
use serde_json::json;

#[test]
fn bodies_follow_the_backend() {
    let body = request_body(Backend::OpenaiCompletions, "m", "hi", 8, true);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["prompt"], "hi");
    assert_eq!(v["max_tokens"], 8);
    assert_eq!(v["ignore_eos"], true);
    assert_eq!(v["stream_options"]["include_usage"], true);
    let chat = request_body(Backend::OpenaiChat, "m", "hi", 8, false);
    let v: Value = serde_json::from_slice(&chat).unwrap();
    assert_eq!(v["messages"][0]["content"], "hi");
    assert_eq!(v["max_completion_tokens"], 8);
    assert!(v.get("ignore_eos").is_none());
    let responses = request_body(Backend::OpenaiResponses, "m", "hi", 8, false);
    let v: Value = serde_json::from_slice(&responses).unwrap();
    assert_eq!(
        v,
        json!({"model": "m", "input": "hi", "max_output_tokens": 8, "temperature": 0.0,
               "stream": true, "store": false})
    );
    let messages = request_body(Backend::AnthropicMessages, "m", "hi", 8, false);
    let v: Value = serde_json::from_slice(&messages).unwrap();
    assert_eq!(
        v,
        json!({"model": "m", "max_tokens": 8,
               "messages": [{"role": "user", "content": "hi"}],
               "temperature": 0.0, "stream": true})
    );
    let embeddings = request_body(Backend::OpenaiEmbeddings, "m", "hi", 8, false);
    let v: Value = serde_json::from_slice(&embeddings).unwrap();
    assert_eq!(
        v,
        json!({"model": "m", "input": "hi", "truncate_prompt_tokens": -1})
    );
}

#[test]
fn error_messages_are_one_line() {
    let openai = br#"{"error": {"message": "model x not found", "code": 404}}"#;
    assert_eq!(error_message(openai), "model x not found");
    let anthropic = br#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: Field required"}}"#;
    assert_eq!(error_message(anthropic), "max_tokens: Field required");
    assert_eq!(error_message(b"Not Found\nmore"), "Not Found");
    assert_eq!(
        error_message(br#"{"detail": "Not Found"}"#),
        "\"Not Found\""
    );
}

/// A server that says keep-alive but closes each connection a while after its answer,
/// without reading what came next (llama.cpp's server does): every answer is one
/// completions chunk, then `[DONE]`. Returns its address and the requests it answered.
async fn closing_server() -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let count = Arc::clone(&count);
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                // the head, then as many body bytes as it announces
                let (head_end, length) = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while request.len() < head_end + length {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                }
                let body = "data: {\"choices\": [{\"index\": 0, \"text\": \"hi\"}]}\n\n\
                            data: [DONE]\n\n";
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                     connection: keep-alive\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if socket.write_all(answer.as_bytes()).await.is_ok() {
                    count.fetch_add(1, Ordering::SeqCst);
                }
                // long enough for the client to send its next request on this connection
                tokio::time::sleep(Duration::from_millis(50)).await;
            });
        }
    });
    (addr, answered)
}

#[tokio::test]
async fn a_connection_the_server_closed_is_retried_on_a_new_one() {
    let (addr, answered) = closing_server().await;
    let client = HttpClient::new();
    let uri = parse_uri(&format!("http://{addr}/v1/completions")).unwrap();
    let body = request_body(Backend::OpenaiCompletions, "m", "hi", 1, false);
    let mut retries = 0;
    for _ in 0..8 {
        let record = client.send(&uri, body.clone(), 1).await;
        assert!(record.success, "{:?}", record.error);
        retries += record.retries;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(answered.load(std::sync::atomic::Ordering::SeqCst), 8);
    // A request that finds its pooled connection closed is sent again on a connection of
    // its own (not pooled), so the next one opens a new pooled connection: every second
    // request is retried (fewer if a close is noticed before a request goes out).
    assert!((1..=4).contains(&retries), "{retries} retries");
}

#[test]
fn only_a_closed_connection_is_worth_a_retry() {
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert!(closed_before_answer(&reset));
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert!(!closed_before_answer(&refused));
    let timeout = std::io::Error::from(std::io::ErrorKind::TimedOut);
    assert!(!closed_before_answer(&timeout));
}
