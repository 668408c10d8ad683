//! `--backend openai-embeddings` end to end in the crate: a whole run (`runner::bench`)
//! against an embeddings server on loopback, written here, that records every request
//! body, answers each after a fixed delay with `usage.prompt_tokens` = its words + 2 (a
//! CLS and a SEP token), and fails two requests (an error status, a body without `data`).
//! The prompts come from a custom dataset on a word-level tokenizer (one token a word).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};

use vrs_bench::args::{Backend, BenchArgs};
use vrs_bench::client::{parse_uri, HttpClient};
use vrs_bench::runner;

/// Each answer waits this long, so every E2EL is at least this.
const DELAY: Duration = Duration::from_millis(20);
const WORDS: &[&str] = &["<unk>", "a", "b", "c", "d", "e", "f", "g", "h"];
/// The dataset's prompts (1 to 6 words).
const PROMPTS: &[&str] = &["a", "a b", "a b c", "a b c d", "a b c d e", "a b c d e f"];

/// One POST the server answered: its body, and whether the answer was a success.
#[derive(Debug, Clone)]
struct Seen {
    body: Value,
    ok: bool,
}

/// A word-level tokenizer and a custom dataset file in a temporary directory.
fn model_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let vocab: serde_json::Map<String, Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| ((*w).to_owned(), Value::from(i)))
        .collect();
    let tokenizer = json!({
        "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    std::fs::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let lines: Vec<String> = PROMPTS
        .iter()
        .map(|p| json!({"prompt": p}).to_string())
        .collect();
    std::fs::write(dir.path().join("data.jsonl"), lines.join("\n")).unwrap();
    dir
}

/// Reads one HTTP/1.1 request: (request line, body).
fn read_request(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut reader = BufReader::new(socket);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut length = 0;
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().ok()?;
            }
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((line.trim_end().to_owned(), body))
}

fn answer(socket: &mut TcpStream, status: &str, body: &Value) {
    let text = body.to_string();
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n",
        text.len()
    );
    let _ = socket.write_all(head.as_bytes());
    let _ = socket.write_all(text.as_bytes());
}

/// The server: `GET /v1/models` lists "emb" rooted at `root`; the `fail_at`-th POST (0:
/// the first) answers 400, the `no_data_at`-th a body without `data`, every other one
/// an embedding.
fn embeddings_server(
    root: &Path,
    fail_at: usize,
    no_data_at: usize,
) -> (SocketAddr, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let root = root.display().to_string();
    std::thread::spawn(move || {
        for mut socket in listener.incoming().flatten() {
            let Some((line, body)) = read_request(&mut socket) else {
                continue;
            };
            if line.starts_with("GET /v1/models ") {
                let models = json!({"object": "list",
                                    "data": [{"id": "emb", "object": "model", "root": root}]});
                answer(&mut socket, "200 OK", &models);
                continue;
            }
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let index = log.lock().unwrap().len();
            std::thread::sleep(DELAY);
            let words = body["input"]
                .as_str()
                .map_or(0, |t| t.split_whitespace().count());
            let usage = json!({"prompt_tokens": words + 2, "total_tokens": words + 2});
            let ok =
                line == "POST /v1/embeddings HTTP/1.1" && index != fail_at && index != no_data_at;
            if index == fail_at {
                let error = json!({"error": {"message": "input too long", "code": 400}});
                answer(&mut socket, "400 Bad Request", &error);
            } else if index == no_data_at {
                answer(
                    &mut socket,
                    "200 OK",
                    &json!({"object": "list", "usage": usage}),
                );
            } else {
                let data = json!([{"object": "embedding", "index": 0, "embedding": [0.6, 0.8]}]);
                let reply = json!({"object": "list", "model": "emb", "data": data, "usage": usage});
                answer(&mut socket, "200 OK", &reply);
            }
            log.lock().unwrap().push(Seen { body, ok });
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn a_run_sends_embedding_requests_and_reports_e2el_and_input_tokens() {
    let dir = model_dir();
    // POST 0 is the probe (vLLM's initial test run); 2 and 5 fail, one each way.
    let (addr, seen) = embeddings_server(dir.path(), 2, 5);
    let data = dir.path().join("data.jsonl");
    let document = json!({
        "base_url": format!("http://{addr}"), "backend": "openai-embeddings",
        "dataset": "custom", "dataset_path": data,
        "skip_chat_template": true, "num_prompts": PROMPTS.len(), "max_concurrency": 1,
        "metric_percentiles": [50, 90],
    });
    let args = BenchArgs::from_json(&document.to_string()).unwrap();
    assert_eq!(args.url(), format!("http://{addr}/v1/embeddings"));
    let result = runner::bench(args).await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen.len(),
        PROMPTS.len() + 1,
        "the probe, then each prompt once"
    );

    // vLLM's openai-embeddings body: the prompt text as input, truncation to the model's
    // length; nothing of generation.
    let mut inputs: Vec<&str> = Vec::new();
    for s in &seen {
        let mut keys: Vec<&String> = s.body.as_object().unwrap().keys().collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["input", "model", "truncate_prompt_tokens"],
            "{}",
            s.body
        );
        assert_eq!(s.body["model"], "emb");
        assert_eq!(s.body["truncate_prompt_tokens"], -1);
        inputs.push(s.body["input"].as_str().unwrap());
    }
    let mut measured = inputs[1..].to_vec();
    measured.sort_unstable();
    assert_eq!(measured, PROMPTS, "every dataset prompt, as text");

    // Input tokens are the server's usage (words + 2), of the completed requests only.
    let ok: Vec<&Seen> = seen[1..].iter().filter(|s| s.ok).collect();
    let input_tokens: u64 = ok
        .iter()
        .map(|s| s.body["input"].as_str().unwrap().split_whitespace().count() as u64 + 2)
        .sum();
    assert_eq!(result["completed"], 4);
    assert_eq!(result["failed"], 2);
    assert_eq!(result["total_input_tokens"], input_tokens);
    assert_eq!(result["total_input_sequences"], 4);
    assert_eq!(result["total_output_tokens"], 0);
    assert_eq!(result["backend"], "openai-embeddings");
    assert_eq!(result["endpoint"], "/v1/embeddings");

    let number = |key: &str| {
        result[key]
            .as_f64()
            .unwrap_or_else(|| panic!("no number {key}: {result:?}"))
    };
    let duration = number("duration");
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(close(number("request_throughput"), 4.0 / duration));
    assert!(close(number("input_sequence_throughput"), 4.0 / duration));
    assert!(close(
        number("total_token_throughput"),
        input_tokens as f64 / duration
    ));
    // Sequential requests, each answered after DELAY: every E2EL is at least that, and
    // together they fit in the run.
    let ms = DELAY.as_secs_f64() * 1000.0;
    for key in [
        "mean_e2el_ms",
        "median_e2el_ms",
        "p50_e2el_ms",
        "p90_e2el_ms",
    ] {
        assert!(number(key) >= ms, "{key} {}", number(key));
    }
    assert!(number("std_e2el_ms") >= 0.0);
    assert!(number("p90_e2el_ms") >= number("p50_e2el_ms"));
    assert!(4.0 * number("mean_e2el_ms") <= duration * 1000.0);
    // No generation metrics: nothing is streamed, nothing generated.
    for key in [
        "mean_ttft_ms",
        "mean_tpot_ms",
        "mean_itl_ms",
        "output_throughput",
        "max_output_tokens_per_s",
    ] {
        assert!(!result.contains_key(key), "{key} in {result:?}");
    }
    let errors: Vec<&str> = result["error_samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("HTTP 400") && errors[0].contains("input too long"));
    assert!(errors[1].contains("no \"data\" list"), "{errors:?}");
}

/// Without `usage`, the dataset's prompt length is the count; a body that is not JSON
/// fails the request.
#[tokio::test]
async fn one_request_falls_back_to_the_dataset_count_and_fails_on_garbage() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let replies = [
            json!({"data": [{"embedding": [1.0]}]}),
            json!("<not an object>"),
        ];
        for (mut socket, reply) in listener.incoming().flatten().zip(replies) {
            if read_request(&mut socket).is_some() {
                answer(&mut socket, "200 OK", &reply);
            }
        }
    });
    let client = HttpClient::for_backend(Backend::OpenaiEmbeddings, None);
    let uri = parse_uri(&format!("http://{addr}/v1/embeddings")).unwrap();
    let record = client.send(&uri, Bytes::from_static(b"{}"), 9).await;
    assert!(record.success, "{:?}", record.error);
    assert_eq!((record.prompt_len, record.output_tokens), (9, 0));
    assert_eq!(record.ttft, record.latency);
    let record = client.send(&uri, Bytes::from_static(b"{}"), 9).await;
    let error = record.error.unwrap();
    assert!(!record.success);
    assert!(error.contains("not an embeddings JSON body"), "{error}");
}
