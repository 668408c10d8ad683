//! The render router in-process on the tiny word-level model (no engine anywhere).

use super::*;
use crate::args::{RenderArgs, RenderSpecific};
use crate::lifecycle::render::{load, model_limits, DEFAULT_MAX_POSITION_EMBEDDINGS};
use crate::parsers::tools::ToolFormat;
use crate::routes::render_router as router;
use crate::state::RenderState;
use crate::testutil::{tiny_model_dir, MAX_MODEL_LEN};
use axum::body::Body;
use axum::http::Request;
use axum::http::StatusCode;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

struct Fixture {
    state: Arc<RenderState>,
    _dir: tempfile::TempDir,
}

fn fixture() -> Fixture {
    fixture_with(None)
}

/// The fixture, with `--chat-template` (a file in the model directory) when given.
fn fixture_with(template: Option<&str>) -> Fixture {
    fixture_parsers(template, None)
}

/// The fixture with `--chat-template` and `--tool-call-parser` when given.
fn fixture_parsers(template: Option<&str>, tool_call_parser: Option<&str>) -> Fixture {
    let dir = tiny_model_dir();
    let chat_template = template.map(|source| {
        let path = dir.path().join("override.jinja");
        std::fs::write(&path, source).unwrap();
        path.display().to_string()
    });
    std::fs::write(
        dir.path().join("config.json"),
        json!({"vocab_size": 11, "max_position_embeddings": 4096}).to_string(),
    )
    .unwrap();
    let args = RenderArgs {
        model: dir.path().display().to_string(),
        served_model_name: Some("tiny".into()),
        host: None,
        port: None,
        log_level: None,
        chat_template,
        tokenizer: None,
        chat_template_content_format: None,
        http: Default::default(),
        specific: RenderSpecific {
            max_model_len: Some(MAX_MODEL_LEN),
            tool_call_parser: tool_call_parser.map(str::to_owned),
            reasoning_parser: None,
        },
    };
    Fixture {
        state: Arc::new(load(&args).unwrap()),
        _dir: dir,
    }
}

async fn call(f: &Fixture, method: &str, path: &str, body: Value) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = router(Arc::clone(&f.state)).oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    (status, value)
}

fn error_of(body: &Value) -> (&str, Option<&str>) {
    (
        body["error"]["message"].as_str().unwrap(),
        body["error"]["param"].as_str(),
    )
}

#[tokio::test]
async fn chat_render_is_what_the_engine_would_receive() {
    let f = fixture();
    let body = json!({"model": "tiny", "messages": [{"role": "user", "content": "hello world"}],
                      "temperature": 0, "seed": 7, "stop": ["x"], "stop_token_ids": [1]});
    let (status, out) = call(&f, "POST", "/v1/chat/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["model"], "tiny");
    assert!(out["request_id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(out["prompt"], "<s> user hello world assistant");
    assert_eq!(out["prompt_token_ids"], json!([0, 9, 3, 4, 10]));
    let sampling = &out["sampling_params"];
    assert_eq!(sampling["max_tokens"], MAX_MODEL_LEN - 5);
    assert_eq!(sampling["temperature"], 0.0);
    assert_eq!(sampling["seed"], 7);
    assert_eq!(sampling["stop_token_ids"], json!([1]));
    let keys: Vec<&str> = sampling
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "max_tokens",
            "min_tokens",
            "temperature",
            "top_p",
            "top_k",
            "min_p",
            "seed",
            "stop_token_ids",
            "ignore_eos",
            "presence_penalty",
            "frequency_penalty",
            "repetition_penalty",
            "logprobs",
            "prompt_logprobs",
            "logit_bias",
            "allowed_token_ids",
            "bad_words_token_ids",
            "structured_outputs",
            "thinking_budget",
            "extra_args"
        ]
    );
    assert_eq!(sampling["structured_outputs"], Value::Null);
    assert_eq!(sampling["extra_args"], Value::Null);
}

#[tokio::test]
async fn render_shows_the_extra_args_as_json() {
    let f = fixture();
    let body = json!({"prompt": "hello", "priority": 5,
                      "vllm_xargs": {"a": [1, "b", 2.5], "t": true},
                      "kv_transfer_params": {"k": {"n": null}}});
    let (status, out) = call(&f, "POST", "/v1/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["sampling_params"]["extra_args"],
        json!({"a": [1, "b", 2.5], "t": 1, "kv_transfer_params": {"k": {"n": null}}})
    );
}

#[tokio::test]
async fn render_shows_the_constraint_by_field_name() {
    let f = fixture();
    let body = json!({"prompt": "hello", "max_tokens": 1,
                      "structured_outputs": {"choice": ["a", "日本"], "disable_fallback": true}});
    let (status, out) = call(&f, "POST", "/v1/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(
        out["sampling_params"]["structured_outputs"],
        json!({"json": null, "regex": null, "choice": ["a", "日本"], "grammar": null,
               "json_object": false, "structural_tag": null})
    );
    let body = json!({"messages": [{"role": "user", "content": "hello"}],
                      "response_format": {"type": "json_object"},
                      "structured_outputs": {"json": {"type": "object"}}});
    let (status, out) = call(&f, "POST", "/v1/chat/completions/render", body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{out}");
    assert_eq!(
        error_of(&out),
        (
            "only one structured-output constraint may be given; this request sets \
             `response_format` and `structured_outputs.json`",
            Some("structured_outputs.json")
        )
    );
}

#[tokio::test]
async fn completion_render_answers_a_batch_with_a_list() {
    let f = fixture();
    let body = json!({"prompt": ["hello", "foo"], "echo": true, "max_tokens": 0,
                      "logprobs": 2, "logit_bias": {"3": 1}});
    let (status, out) = call(&f, "POST", "/v1/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let answers = out.as_array().expect("a list for a batch");
    assert_eq!(answers.len(), 2);
    assert_eq!(answers[0]["prompt"], "hello");
    assert_eq!(answers[1]["prompt"], "foo");
    assert_ne!(answers[0]["request_id"], answers[1]["request_id"]);
    assert_eq!(answers[1]["sampling_params"]["prompt_logprobs"], 2);
    // One prompt of a list renders, with what the engine would be sent.
    let body = json!({"prompt": ["hello"], "echo": true, "max_tokens": 0, "logprobs": 2,
                      "logit_bias": {"3": 1}});
    let (status, out) = call(&f, "POST", "/v1/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let sampling = &out["sampling_params"];
    assert_eq!(sampling["max_tokens"], 1);
    assert_eq!(sampling["prompt_logprobs"], 2);
    assert_eq!(sampling["logit_bias"], json!([[3, 1.0]]));
}

#[tokio::test]
async fn completion_render_keeps_the_prompt_as_given() {
    let f = fixture();
    let (status, out) = call(
        &f,
        "POST",
        "/v1/completions/render",
        json!({"prompt": "hello foo", "max_tokens": 4}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["prompt"], "hello foo");
    assert_eq!(out["prompt_token_ids"], json!([3, 5]));
    assert_eq!(out["sampling_params"]["max_tokens"], 4);
    let (_, ids) = call(
        &f,
        "POST",
        "/v1/completions/render",
        json!({"prompt": [[3, 4, 5]]}),
    )
    .await;
    assert_eq!(ids["prompt"], Value::Null);
    assert_eq!(ids["prompt_token_ids"], json!([3, 4, 5]));
    assert!(ids["request_id"].as_str().unwrap().starts_with("cmpl-"));
}

#[tokio::test]
async fn errors_match_the_serving_path() {
    let f = fixture();
    let chat = "/v1/chat/completions/render";
    let (status, out) = call(
        &f,
        "POST",
        chat,
        json!({"messages": [{"role": "user", "content": "hello"}],
        "chat_template_kwargs": {"boom": true}}),
    )
    .await;
    assert_eq!(
        (status, error_of(&out)),
        (StatusCode::BAD_REQUEST, ("boom!", None))
    );
    let (status, out) = call(&f, "POST", chat, json!({"model": "other", "messages": []})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{out}");
    let (status, out) = call(
        &f,
        "POST",
        chat,
        json!({"messages": [{"role": "user", "content": "hello"}],
        "max_tokens": MAX_MODEL_LEN}),
    )
    .await;
    assert_eq!(
        (status, error_of(&out).1),
        (StatusCode::BAD_REQUEST, Some("max_tokens"))
    );
    let (status, out) = call(
        &f,
        "POST",
        "/v1/completions/render",
        json!({"prompt": [99]}),
    )
    .await;
    assert_eq!(
        (status, error_of(&out).1),
        (StatusCode::BAD_REQUEST, Some("prompt"))
    );
    let (status, _) = call(&f, "GET", chat, Value::Null).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _) = call(&f, "POST", "/v1/chat/completions", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn models_and_health() {
    let f = fixture();
    let (status, out) = call(&f, "GET", "/v1/models", Value::Null).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(out["data"][0]["id"], "tiny");
    assert_eq!(out["data"][0]["max_model_len"], MAX_MODEL_LEN);
    let (status, _) = call(&f, "GET", "/health", Value::Null).await;
    assert_eq!(status, StatusCode::OK);
}

#[test]
fn limits_come_from_config_json() {
    let dir = tempfile::tempdir().unwrap();
    let write = |v: Value| std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
    write(json!({"vocab_size": 100, "max_position_embeddings": 2048}));
    assert_eq!(model_limits(dir.path(), None, 7), Ok((100, 2048)));
    assert_eq!(model_limits(dir.path(), Some(64), 7), Ok((100, 64)));
    write(json!({}));
    assert_eq!(
        model_limits(dir.path(), None, 7),
        Ok((7, DEFAULT_MAX_POSITION_EMBEDDINGS))
    );
    write(json!({"vocab_size": "x"}));
    assert!(model_limits(dir.path(), None, 7)
        .unwrap_err()
        .contains("integers"));
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    assert!(model_limits(dir.path(), None, 7)
        .unwrap_err()
        .contains("cannot read"));
}

mod extras;
mod messages;
mod tools;
