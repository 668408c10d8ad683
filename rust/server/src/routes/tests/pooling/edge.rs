//! The pooling routes at the HTTP edge: prompts sent at once and aborted when the client
//! goes away (in-process and over real HTTP on loopback), request ids, the queue's
//! bounds, and `/metrics`.

use std::time::Duration;

use serde_json::json;
use vrs_engine_client::fake::pooling::Pooling;
use vrs_wire::PoolingTask::Embed;

use super::{embedder, ok};
use crate::state::HttpOptions;
use crate::testutil::{bad_request, call, json_of, Harness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_run_concurrently_and_a_gone_client_aborts_them() {
    let delay = Duration::from_secs(1);
    let h = Harness::pooling(Pooling::new(&[Embed], &[]), delay, HttpOptions::default());
    let body = json!({"input": ["hello", "world"]}).to_string();
    let request = call(&h, "POST", "/v1/embeddings", &body);
    let gone = tokio::time::timeout(Duration::from_millis(300), request).await;
    assert!(gone.is_err(), "the fake holds the answers for 1 s");
    // Both engine requests were out before the first answer: the client aborts both.
    assert!(
        h.engine.wait_for(|e| e.aborted().len() == 2),
        "{:?}",
        h.engine.aborted()
    );
    let mut aborted = h.engine.aborted();
    aborted.sort();
    assert!(
        aborted[0].starts_with("embd-") && aborted[0].ends_with("-0"),
        "{aborted:?}"
    );
    assert_eq!(
        aborted[1],
        format!("{}1", &aborted[0][..aborted[0].len() - 1])
    );
}

/// `body` POSTed to `path` over a real TCP connection to `addr` (`Connection: close`);
/// with `hang_up`, the client closes the connection after that long instead of reading.
fn over_tcp(
    addr: std::net::SocketAddr,
    path: &str,
    body: &str,
    hang_up: Option<Duration>,
) -> String {
    use std::io::{Read, Write};
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(request.as_bytes()).unwrap();
    if let Some(after) = hang_up {
        std::thread::sleep(after);
        return String::new();
    }
    let mut raw = String::new();
    tcp.read_to_string(&mut raw).unwrap();
    raw
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_real_http_a_client_that_hangs_up_aborts_its_prompts() {
    let delay = Duration::from_millis(500);
    let h = Harness::pooling(Pooling::new(&[Embed], &[]), delay, HttpOptions::default());
    let (addr, stop, server) = super::super::loopback::serve(&h).await;
    let body = json!({"input": ["hello", "world"]}).to_string();
    let b = body.clone();
    let raw = tokio::task::spawn_blocking(move || over_tcp(addr, "/v1/embeddings", &b, None))
        .await
        .unwrap();
    assert!(raw.starts_with("HTTP/1.1 200"), "{raw}");
    assert!(raw.contains("\"object\":\"embedding\""), "{raw}");
    assert!(h.engine.aborted().is_empty());
    let hang_up = Some(Duration::from_millis(200));
    tokio::task::spawn_blocking(move || over_tcp(addr, "/v1/embeddings", &body, hang_up))
        .await
        .unwrap();
    assert!(
        h.engine.wait_for(|e| e.aborted().len() == 2),
        "{:?}",
        h.engine.aborted()
    );
    let _ = stop.send(());
    drop(server);
}

#[tokio::test]
async fn request_ids_and_the_queue_cover_the_pooling_routes() {
    use crate::edge::cors::CorsSettings;
    use crate::edge::middleware::Middleware;
    use crate::edge::queue::QueueLimits;
    let options = HttpOptions {
        middleware: Middleware::new(&CorsSettings::default(), true).unwrap(),
        queue: QueueLimits {
            max_reqs: Some(2),
            ..QueueLimits::default()
        },
        ..HttpOptions::default()
    };
    let h = Harness::pooling(Pooling::new(&[Embed], &[]), Duration::ZERO, options);
    let body = json!({"input": ["hello", "world"]}).to_string();
    let headers = [("x-request-id", "mine")];
    let (status, _, bytes) =
        crate::testutil::call_with_headers(&h, "POST", "/v1/embeddings", &body, &headers).await;
    let v = json_of(&bytes);
    assert_eq!(
        (status.as_u16(), v["id"].clone()),
        (200, json!("embd-mine")),
        "{v}"
    );
    // A client's id may repeat: the engine's ids are made unique.
    let ids: Vec<String> = h.engine.added().into_iter().map(|r| r.request_id).collect();
    assert!(
        ids[0].starts_with("embd-mine-") && ids[0].ends_with("-0"),
        "{ids:?}"
    );
    assert_eq!(ids[1], format!("{}1", &ids[0][..ids[0].len() - 1]));
    let three = json!({"input": ["hello", "world", "foo"]}).to_string();
    let (_, message) = bad_request(&h, "/v1/embeddings", &three).await;
    assert!(message.contains("makes 3 engine requests"), "{message}");
}

#[tokio::test]
async fn metrics_count_the_pooling_routes() {
    let h = embedder();
    ok(&h, "/v1/embeddings", json!({"input": ["hello", "foo bar"]})).await;
    ok(
        &h,
        "/v1/rerank",
        json!({"query": "hello", "documents": ["foo"]}),
    )
    .await;
    bad_request(&h, "/v1/embeddings", "{}").await;
    let (_, _, bytes) = call(&h, "GET", "/metrics", "").await;
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    for line in [
        "vrs:http_requests_total{endpoint=\"/v1/embeddings\",status=\"200\"} 1",
        "vrs:http_requests_total{endpoint=\"/v1/embeddings\",status=\"400\"} 1",
        "vrs:http_requests_total{endpoint=\"/v1/rerank\",status=\"200\"} 1",
        "vrs:prompt_tokens_total 5",
        "vllm:prompt_tokens_total{model_name=\"tiny\",engine=\"0\"} 5",
        "vllm:request_success_total{model_name=\"tiny\",engine=\"0\",finished_reason=\"stop\"} 4",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
}
