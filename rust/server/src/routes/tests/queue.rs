//! The bounded queue through the serving router and the fake engine (its step delay
//! holds each request's first output back): a full queue answers 503 with
//! `Retry-After` before anything reaches the engine, the admitted requests complete,
//! `--max-queue-wait` aborts a request still waiting (503, or an SSE error event once
//! the stream started), and `/metrics` counts each refusal by reason.

use super::*;
use crate::edge::queue::QueueLimits;
use crate::state::HttpOptions;
use axum::body::Bytes;

fn harness(queue: QueueLimits, delay: Duration) -> Arc<Harness> {
    Arc::new(Harness::with_options(
        vec![5, 6],
        delay,
        HttpOptions {
            queue,
            ..HttpOptions::default()
        },
    ))
}

/// (status, Retry-After, body) of one POST.
async fn post(h: &Harness, path: &str, body: &str) -> (StatusCode, Option<String>, Bytes) {
    let request = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_owned()))
        .unwrap();
    let response = router(Arc::clone(&h.state)).oneshot(request).await.unwrap();
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    let bytes = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    (status, retry, bytes)
}

async fn metric(h: &Harness, reason: &str) -> u64 {
    let (_, _, bytes) = call(h, "GET", "/metrics", "").await;
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let prefix = format!("vrs:requests_rejected_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
        .parse()
        .unwrap()
}

const ONE: &str = r#"{"prompt": [3, 4], "max_tokens": 2}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_refuses_with_503_and_the_admitted_complete() {
    let limits = QueueLimits {
        max_reqs: Some(1),
        ..QueueLimits::default()
    };
    let h = harness(limits, Duration::from_millis(400));
    let admitted = {
        let h = Arc::clone(&h);
        tokio::spawn(async move { post(&h, "/v1/completions", ONE).await })
    };
    assert!(h.engine.wait_for(|e| e.added().len() == 1));
    assert_eq!(h.state.queue.queued(), (1, 2));
    let (status, retry, bytes) = post(&h, "/v1/completions", ONE).await;
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        json_of(&bytes)
    );
    assert_eq!(retry.as_deref(), Some("1"));
    let message = json_of(&bytes)["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("--max-num-queued-reqs"), "{message}");
    assert_eq!(
        h.engine.added().len(),
        1,
        "a refused request never reaches the engine"
    );
    let (status, _, bytes) = admitted.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));
    assert_eq!(h.state.queue.queued(), (0, 0));
    let (status, _, _) = post(&h, "/v1/completions", ONE).await;
    assert_eq!(status, StatusCode::OK, "the queue has room again");
    assert_eq!(metric(&h, "queue_full_requests").await, 1);
    assert_eq!(metric(&h, "queue_full_tokens").await, 0);
    // A request of n = 2 could never fit: 400, not a 503 to retry forever.
    let (status, _, _) = post(&h, "/v1/completions", r#"{"prompt": [3], "n": 2}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_bound_counts_queued_prompt_tokens() {
    let limits = QueueLimits {
        max_tokens: Some(5),
        ..QueueLimits::default()
    };
    let h = harness(limits, Duration::from_millis(400));
    let first = {
        let h = Arc::clone(&h);
        tokio::spawn(async move {
            post(
                &h,
                "/v1/completions",
                r#"{"prompt": [3, 4, 5], "max_tokens": 1}"#,
            )
            .await
        })
    };
    assert!(h.engine.wait_for(|e| e.added().len() == 1));
    let (status, retry, bytes) =
        post(&h, "/v1/completions", ONE.replace("4]", "4, 5]").as_str()).await;
    assert_eq!(
        (status, retry.as_deref()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("1"))
    );
    assert!(String::from_utf8_lossy(&bytes).contains("--max-num-queued-tokens"));
    let (status, _, _) = post(&h, "/v1/completions", ONE).await; // 3 + 2 fit
    assert_eq!(status, StatusCode::OK);
    assert_eq!(first.await.unwrap().0, StatusCode::OK);
    assert_eq!(metric(&h, "queue_full_tokens").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_queue_wait_aborts_the_waiting_request() {
    let limits = QueueLimits {
        max_wait: Some(Duration::from_millis(150)),
        ..QueueLimits::default()
    };
    let h = harness(limits, Duration::from_millis(1500));
    let started = std::time::Instant::now();
    let (status, retry, bytes) = post(&h, "/v1/completions", ONE).await;
    assert!(
        started.elapsed() < Duration::from_millis(1200),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        json_of(&bytes)
    );
    assert_eq!(retry.as_deref(), Some("1"));
    let message = json_of(&bytes)["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("0.15 s") && message.contains("--max-queue-wait"),
        "{message}"
    );
    let added = h.engine.added();
    assert!(h
        .engine
        .wait_for(|e| e.aborted() == vec![added[0].request_id.clone()]));
    // Streamed: the head went out, so the wait limit is an error event, then [DONE].
    let body = r#"{"prompt": [3, 4], "max_tokens": 2, "stream": true}"#;
    let (status, _, bytes) = post(&h, "/v1/completions", body).await;
    assert_eq!(status, StatusCode::OK);
    let events = events(&bytes);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["error"]["code"], 503);
    assert!(h.engine.wait_for(|e| e.aborted().len() == 2));
    assert_eq!(h.state.admission.active(), 0);
    assert_eq!(h.state.queue.queued(), (0, 0));
    assert_eq!(metric(&h, "queue_wait_timeout").await, 2);
    let (_, _, load) = call(&h, "GET", "/load", "").await;
    assert_eq!(json_of(&load)["server_load"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_that_starts_in_time_is_not_cut_by_the_wait_limit() {
    let limits = QueueLimits {
        max_wait: Some(Duration::from_millis(300)),
        ..QueueLimits::default()
    };
    // Each step takes 100 ms: the first output comes in time, the whole reply after the
    // wait limit.
    let h = harness(limits, Duration::from_millis(100));
    let (status, _, bytes) = post(
        &h,
        "/v1/completions",
        r#"{"prompt": [3], "max_tokens": 6, "ignore_eos": true}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));
    assert_eq!(json_of(&bytes)["usage"]["completion_tokens"], 6);
    assert!(h.engine.aborted().is_empty());
    assert_eq!(metric(&h, "queue_wait_timeout").await, 0);
}
