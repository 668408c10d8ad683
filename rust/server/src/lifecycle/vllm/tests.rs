//! vLLM's engines behind vrs-rs: what the model directory adds to vLLM's ready response,
//! and an engine that fails to start ending `serve --engine vllm` at once.

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::testutil::tiny_model_dir;

fn vllm_args(model: &std::path::Path, extra: Value) -> ServeArgs {
    let mut doc = json!({"model": model.to_string_lossy(), "engine": "vllm", "port": 0,
                         "host": "127.0.0.1"});
    if let (Value::Object(doc), Value::Object(extra)) = (&mut doc, extra) {
        doc.extend(extra);
    }
    ServeArgs::from_json(&doc.to_string()).unwrap()
}

fn text_of(dir: &Path) -> Text {
    crate::text::load_text_with(dir, None, vrs_text::ContentFormatOption::Auto).unwrap()
}

#[test]
fn model_info_reads_vocab_and_eos_from_the_model_files() {
    let dir = tiny_model_dir();
    let text = text_of(dir.path());
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"vocab_size": 151936, "eos_token_id": 1}"#,
    )
    .unwrap();
    let args = vllm_args(dir.path(), json!({"served_model_name": "tiny"}));
    let info = model_info(&args, &text);
    assert_eq!(info.vocab_size, 151936);
    assert_eq!(info.eos_token_ids, [1]);
    assert_eq!(info.model_name, "tiny");
    std::fs::write(
        dir.path().join("generation_config.json"),
        r#"{"eos_token_id": [7, 1]}"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("config.json"),
        r#"{"text_config": {"vocab_size": 99}}"#,
    )
    .unwrap();
    let info = model_info(&args, &text);
    assert_eq!((info.vocab_size, info.eos_token_ids), (99, vec![7, 1]));
    std::fs::write(dir.path().join("config.json"), "{}").unwrap();
    let info = model_info(&args, &text);
    assert_eq!(
        info.vocab_size,
        text.0.vocab_size() as u64,
        "the tokenizer's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_that_exits_before_ready_ends_serve_at_once() {
    let dir = tiny_model_dir();
    let args = vllm_args(
        dir.path(),
        json!({"vllm_engine_command": ["sh", "-c", "echo failing >&2; exit 3"]}),
    );
    let code = tokio::time::timeout(Duration::from_secs(30), serve::run(args))
        .await
        .expect("serve --engine vllm hung on an engine that exited");
    assert_eq!(code, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interpreter_without_vllm_ends_serve_at_once() {
    let dir = tiny_model_dir();
    let args = vllm_args(dir.path(), json!({"vllm_python": "/bin/false"}));
    let code = tokio::time::timeout(Duration::from_secs(30), serve::run(args))
        .await
        .expect("serve --engine vllm hung on a bad interpreter");
    assert_eq!(code, 1);
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// One HTTP/1.1 request on a fresh connection; the response as text (None: refused).
async fn http(port: u16, method: &str, path: &str, body: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut out = String::new();
    stream.read_to_string(&mut out).await.ok()?;
    Some(out)
}

/// Way 3: `serve --engine vllm --data-parallel-size-local 0` waits on the handshake port;
/// a (fake) vLLM engine joins; requests are served over vLLM's wire; the engine's death
/// ends serving with exit code 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_vllm_engines_join_and_are_served() {
    use vrs_engine_client::fake::vllm::{run as fake_engine, FakeVllm, Join, VllmReceived};
    let dir = tiny_model_dir();
    let (http_port, rpc_port) = (free_port(), free_port());
    let args = vllm_args(
        dir.path(),
        json!({"port": http_port, "data_parallel_size_local": 0,
               "data_parallel_address": "127.0.0.1", "data_parallel_rpc_port": rpc_port}),
    );
    let server = tokio::spawn(serve::run(args));
    let fake = FakeVllm::default();
    let engine = fake.clone();
    let join = Join::Handshake(format!("tcp://127.0.0.1:{rpc_port}"));
    let thread = std::thread::spawn(move || {
        fake_engine(join, 0, vec![3, 4, 5], Duration::from_millis(1), engine)
    });
    let mut health = None;
    for _ in 0..200 {
        health = http(http_port, "GET", "/health", "").await;
        if health
            .as_deref()
            .is_some_and(|h| h.starts_with("HTTP/1.1 200"))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(health.unwrap_or_default().starts_with("HTTP/1.1 200"));
    let body = json!({"model": dir.path().to_string_lossy(), "prompt": "hello",
                      "max_tokens": 3, "temperature": 0})
    .to_string();
    let reply = http(http_port, "POST", "/v1/completions", &body)
        .await
        .unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("hello world foo"), "{reply}");
    let sent = fake.received.lock().unwrap().clone();
    assert!(
        matches!(sent.as_slice(), [VllmReceived::Add { prompt, .. }] if prompt == &vec![3]),
        "{sent:?}"
    );
    fake.kill.store(true, std::sync::atomic::Ordering::SeqCst);
    let code = tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("serving went on after the engine died")
        .unwrap();
    assert_eq!(code, 1);
    thread.join().unwrap();
}

#[test]
fn a_moe_model_with_data_parallelism_is_refused_without_a_coordinator() {
    let dir = tiny_model_dir();
    let args = vllm_args(dir.path(), json!({}));
    let config = dir.path().join("config.json");
    std::fs::write(&config, r#"{"vocab_size": 10, "num_local_experts": 8}"#).unwrap();
    assert_eq!(
        needs_coordinator(&args, 1),
        None,
        "one engine needs no waves"
    );
    let why = needs_coordinator(&args, 2).expect("MoE with DP 2 is refused");
    assert!(
        why.contains("8 experts") && why.contains("vllm serve"),
        "{why}"
    );
    std::fs::write(&config, r#"{"text_config": {"n_routed_experts": [4]}}"#).unwrap();
    assert!(
        needs_coordinator(&args, 2).is_some(),
        "text_config's experts count"
    );
    std::fs::write(&config, r#"{"vocab_size": 10, "num_experts": 0}"#).unwrap();
    assert_eq!(
        needs_coordinator(&args, 2),
        None,
        "a dense model runs without one"
    );
}

/// Way 3: a remote engine that vanishes (killed: no dead sentinel) while a request is
/// open: its connection closing marks the client dead, the request gets 503 and serving
/// ends with exit code 1, without waiting for another request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_engine_that_vanishes_ends_its_request_and_serving() {
    use vrs_engine_client::fake::vllm::{run as fake_engine, FakeVllm, Join};
    let dir = tiny_model_dir();
    let (http_port, rpc_port) = (free_port(), free_port());
    let args = vllm_args(
        dir.path(),
        json!({"port": http_port, "data_parallel_size_local": 0,
               "data_parallel_address": "127.0.0.1", "data_parallel_rpc_port": rpc_port}),
    );
    let server = tokio::spawn(serve::run(args));
    let fake = FakeVllm::default();
    let engine = fake.clone();
    let join = Join::Handshake(format!("tcp://127.0.0.1:{rpc_port}"));
    let thread = std::thread::spawn(move || {
        fake_engine(join, 0, vec![3, 4, 5], Duration::from_millis(20), engine)
    });
    for _ in 0..200 {
        let health = http(http_port, "GET", "/health", "").await;
        if health.is_some_and(|h| h.starts_with("HTTP/1.1 200")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let body = json!({"model": dir.path().to_string_lossy(), "prompt": "hello",
                      "max_tokens": 2000, "ignore_eos": true})
    .to_string();
    let open = tokio::spawn(async move { http(http_port, "POST", "/v1/completions", &body).await });
    let added =
        tokio::task::block_in_place(|| fake.wait_for(|f| !f.received.lock().unwrap().is_empty()));
    assert!(added, "the request never reached the engine");
    fake.vanish.store(true, std::sync::atomic::Ordering::SeqCst);
    let reply = tokio::time::timeout(Duration::from_secs(10), open)
        .await
        .expect("the open request hung after its engine vanished")
        .unwrap()
        .unwrap_or_default();
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    let code = tokio::time::timeout(Duration::from_secs(30), server)
        .await
        .expect("serving went on after the engine vanished")
        .unwrap();
    assert_eq!(code, 1);
    thread.join().unwrap();
}
