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
    assert_eq!(info.vocab_size, text.0.vocab_size() as u64, "the tokenizer's");
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
