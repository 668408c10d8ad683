//! `/v1/messages` and `/v1/messages/count_tokens` end to end in-process: router + real
//! engine client + fake engine (tiny word-level model: `hello`=3, `foo`=5, `bar`=6,
//! `STOP`=7, EOS=1).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::state::HttpOptions;
use crate::testutil::{call_with_headers as send, json_of, Harness};

async fn post(h: &Harness, body: &Value) -> (StatusCode, String, Bytes) {
    send(h, "POST", "/v1/messages", &body.to_string(), &[]).await
}

/// The (event name, data) pairs of a typed SSE body; each data's `type` is its name.
fn typed_events(bytes: &[u8]) -> Vec<(String, Value)> {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with("\n\n") && !text.contains("[DONE]"), "{text}");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str(), "{e}");
            (name, data)
        })
        .collect()
}

fn names(events: &[(String, Value)]) -> Vec<&str> {
    events.iter().map(|(n, _)| n.as_str()).collect()
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

/// The Anthropic error body of a response: (status, error type, message).
fn anthropic_error(status: StatusCode, bytes: &[u8]) -> (u16, String, String) {
    let v = json_of(bytes);
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["type", "error"], "{v}");
    assert_eq!(v["type"], "error");
    let error_keys: Vec<&String> = v["error"].as_object().unwrap().keys().collect();
    assert_eq!(error_keys, ["type", "message"], "{v}");
    (
        status.as_u16(),
        v["error"]["type"].as_str().unwrap().to_owned(),
        v["error"]["message"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test]
async fn a_message_whole_and_streamed() {
    // A step apart, each token is its own piece (and delta event).
    let h = Harness::start(vec![5, 6], Duration::from_millis(30));
    let body = json!({"model": "tiny", "max_tokens": 2, "system": "hello",
                      "messages": user("hello")});
    let (status, ct, bytes) = post(&h, &body).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "application/json"));
    let v = json_of(&bytes);
    let id = v["id"].as_str().unwrap();
    assert!(id.starts_with("msg_") && id.len() == 36, "{id}");
    // "<s> system hello <s> user hello assistant" → 7 tokens.
    assert_eq!(
        v,
        json!({"id": id, "type": "message", "role": "assistant", "model": "tiny",
               "content": [{"type": "text", "text": " foo bar"}], "stop_reason": "max_tokens",
               "stop_sequence": null, "usage": {"input_tokens": 7,
               "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
               "output_tokens": 2}})
    );
    let sent = &h.engine.added()[0];
    assert_eq!(sent.request_id, format!("msg-{}", &id[4..]));
    assert_eq!(sent.prompt_token_ids, vec![0, 2, 3, 0, 9, 3, 10]);
    assert_eq!(sent.sampling_params.max_tokens, 2);

    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let (status, ct, bytes) = post(&h, &streamed).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let evs = typed_events(&bytes);
    // Each token is a delta, unless a slow reader got them merged into one.
    let deltas = evs.len() - 6;
    assert!((1..=2).contains(&deltas), "{evs:?}");
    let mut expected = vec!["message_start", "ping", "content_block_start"];
    expected.extend(std::iter::repeat("content_block_delta").take(deltas));
    expected.extend(["content_block_stop", "message_delta", "message_stop"]);
    assert_eq!(names(&evs), expected);
    let start = &evs[0].1["message"];
    assert_eq!(start["content"], json!([]));
    assert_eq!(start["stop_reason"], Value::Null);
    assert_eq!(
        start["usage"],
        json!({"input_tokens": 7, "output_tokens": 0})
    );
    assert_eq!(
        evs[2].1,
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "text", "text": ""}})
    );
    let text: String = evs[3..3 + deltas]
        .iter()
        .map(|(_, e)| e["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, " foo bar");
    assert_eq!(
        evs[4 + deltas].1,
        json!({"type": "message_delta",
               "delta": {"stop_reason": "max_tokens", "stop_sequence": null},
               "usage": {"input_tokens": 7, "cache_creation_input_tokens": 0,
                         "cache_read_input_tokens": 0, "output_tokens": 2}})
    );
}

#[tokio::test]
async fn stop_reasons_end_turn_and_stop_sequence() {
    let h = Harness::start(vec![5, 7, 6, 1], Duration::ZERO);
    let body = json!({"model": "tiny", "max_tokens": 10, "messages": user("hello"),
                      "stop_sequences": ["STOP"]});
    let v = json_of(&post(&h, &body).await.2);
    assert_eq!(v["stop_reason"], "stop_sequence");
    assert_eq!(v["stop_sequence"], "STOP");
    assert_eq!(v["content"][0]["text"].as_str().unwrap().trim(), "foo");
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let evs = typed_events(&post(&h, &streamed).await.2);
    let delta = &evs[evs.len() - 2].1["delta"];
    assert_eq!(
        delta,
        &json!({"stop_reason": "stop_sequence", "stop_sequence": "STOP"})
    );

    let h = Harness::start(vec![5, 1], Duration::ZERO);
    let body = json!({"model": "tiny", "max_tokens": 10, "messages": user("hello")});
    let v = json_of(&post(&h, &body).await.2);
    assert_eq!(
        (&v["stop_reason"], &v["stop_sequence"]),
        (&json!("end_turn"), &Value::Null)
    );
    assert_eq!(v["usage"]["output_tokens"], 2);
}

#[tokio::test]
async fn thinking_and_a_forced_tool_call_become_blocks() {
    let options = HttpOptions {
        reasoning_parser: Some("qwen3"),
        tool_call_parser: Some("hermes"),
        ..HttpOptions::default()
    };
    let h = Harness::with_options(vec![5, 6], Duration::ZERO, options);
    // The prompt leaves a <think> open: the answer is reasoning.
    let body = json!({"model": "tiny", "max_tokens": 2, "messages": user("hello <think>")});
    let v = json_of(&post(&h, &body).await.2);
    assert_eq!(
        v["content"],
        json!([{"type": "thinking", "thinking": " foo bar", "signature": ""}])
    );
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let evs = typed_events(&post(&h, &streamed).await.2);
    assert_eq!(
        evs[2].1["content_block"],
        json!({"type": "thinking", "thinking": "", "signature": ""})
    );
    assert_eq!(evs[3].1["delta"]["type"], "thinking_delta");

    // A forced call goes to the engine as chat's does: the same prompt and constraint,
    // and the same answer (the tiny vocabulary cannot spell a call, and under a forcing
    // `tool_choice` text that is no call is dropped, as in vLLM: no block, chat's "").
    let tools = json!([{"name": "f", "input_schema": {"type": "object"}}]);
    let body = json!({"model": "tiny", "max_tokens": 2, "messages": user("hello"),
                      "tools": tools, "tool_choice": {"type": "tool", "name": "f"}});
    let v = json_of(&post(&h, &body).await.2);
    let sent = h.engine.added().pop().unwrap();
    assert!(sent.sampling_params.structured_outputs.is_some());
    let chat = json!({"model": "tiny", "max_tokens": 2, "messages": user("hello"),
                      "tools": [{"type": "function", "function": {"name": "f",
                                 "parameters": {"type": "object"}}}],
                      "tool_choice": {"type": "function", "function": {"name": "f"}}});
    let (_, _, bytes) = send(&h, "POST", "/v1/chat/completions", &chat.to_string(), &[]).await;
    let chat_sent = h.engine.added().pop().unwrap();
    assert_eq!(sent.prompt_token_ids, chat_sent.prompt_token_ids);
    assert_eq!(
        sent.sampling_params.structured_outputs,
        chat_sent.sampling_params.structured_outputs
    );
    let message = &json_of(&bytes)["choices"][0]["message"];
    assert_eq!(
        (&v["content"], &message["content"]),
        (&json!([]), &json!(""))
    );
}

#[tokio::test]
async fn count_tokens_counts_the_rendered_prompt() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = json!({"model": "tiny", "system": "hello", "messages": user("hello world")});
    let (status, _, bytes) = send(
        &h,
        "POST",
        "/v1/messages/count_tokens",
        &body.to_string(),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(json_of(&bytes), json!({"input_tokens": 8}));
    assert!(h.engine.added().is_empty());
    let mut streamed = body.clone();
    streamed["stream"] = json!(false);
    let (status, _, bytes) = send(
        &h,
        "POST",
        "/v1/messages/count_tokens",
        &streamed.to_string(),
        &[],
    )
    .await;
    assert_eq!(
        anthropic_error(status, &bytes),
        (
            400,
            "invalid_request_error".into(),
            "stream is not supported by count_tokens".into()
        )
    );
}

#[tokio::test]
async fn every_400_is_in_anthropics_shape() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let base = json!({"model": "tiny", "max_tokens": 4, "messages": user("hello")});
    let with = |key: &str, value: Value| {
        let mut b = base.clone();
        b[key] = value;
        b.to_string()
    };
    let blocks = |content: Value| with("messages", json!([{"role": "user", "content": content}]));
    let cases: Vec<(String, u16, &str, &str)> = vec![
        (r#"{"model": "tiny", "messages": [{"role": "user", "content": "hello"}]}"#.into(),
         400, "invalid_request_error", "max_tokens: Field required"),
        (blocks(json!([{"type": "image", "source": {}}])), 400, "invalid_request_error",
         "messages[0].content[0].type: content block type 'image' is not supported"),
        (blocks(json!([{"type": "tool_result", "tool_use_id": "t9", "content": "x"}])), 400,
         "invalid_request_error",
         "messages[0].content[0].tool_use_id: tool_result for unknown tool_use_id 't9'"),
        (with("previous_response_id", json!("r")), 400, "invalid_request_error",
         "previous_response_id: unknown field 'previous_response_id'"),
        (with("thinking", json!({"type": "enabled", "budget_tokens": 2048})), 400,
         "invalid_request_error", "thinking.budget_tokens: budget_tokens (2048) must be less than max_tokens (4)"),
        (with("tools", json!([{"type": "bash_20250124", "name": "bash"}])), 400,
         "invalid_request_error",
         "tools[0].type: tool type 'bash_20250124' is not supported: only custom tools (name, description, input_schema)"),
        (with("model", json!("gpt-9")), 404, "not_found_error", "The model `gpt-9` does not exist."),
        ("{not json".into(), 400, "invalid_request_error", "invalid JSON"),
        (with("messages", json!(vec![json!({"role": "user", "content": "hello ".repeat(80)})])), 400,
         "invalid_request_error", "maximum context length is 64"),
    ];
    for (body, status, kind, message) in cases {
        let (got, _, bytes) = send(&h, "POST", "/v1/messages", &body, &[]).await;
        let (got_status, got_kind, got_message) = anthropic_error(got, &bytes);
        assert_eq!(
            (got_status, got_kind.as_str()),
            (status, kind),
            "{body}: {got_message}"
        );
        assert!(got_message.contains(message), "{body}: {got_message}");
    }
    let reasoning = with(
        "thinking",
        json!({"type": "enabled", "budget_tokens": 1024}),
    );
    let mut body: Value = serde_json::from_str(&reasoning).unwrap();
    body["max_tokens"] = json!(2000);
    let (status, _, bytes) = post(&h, &body).await;
    assert_eq!(
        anthropic_error(status, &bytes).2,
        "thinking needs a reasoning parser: start the server with --reasoning-parser"
    );
    let (status, _, bytes) = send(&h, "GET", "/v1/messages", "", &[]).await;
    assert_eq!(anthropic_error(status, &bytes).0, 405);
    let (status, _, bytes) = send(&h, "POST", "/v1/messages/nope", "{}", &[]).await;
    assert_eq!(anthropic_error(status, &bytes).1, "not_found_error");
    assert!(h.engine.added().is_empty());
}

#[tokio::test]
async fn the_api_key_comes_as_x_api_key_or_bearer() {
    let options = HttpOptions {
        api_key: Some("sekrit".into()),
        ..HttpOptions::default()
    };
    let h = Harness::with_options(vec![5], Duration::ZERO, options);
    let body = json!({"model": "tiny", "max_tokens": 1, "messages": user("hello")}).to_string();
    let (status, _, bytes) = send(&h, "POST", "/v1/messages", &body, &[]).await;
    assert_eq!(anthropic_error(status, &bytes).1, "authentication_error");
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(&h, "POST", "/v1/messages", &body, &[("x-api-key", "wrong")]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    for header in [("x-api-key", "sekrit"), ("authorization", "Bearer sekrit")] {
        let (status, _, bytes) = send(&h, "POST", "/v1/messages", &body, &[header]).await;
        assert_eq!(status, StatusCode::OK, "{header:?}: {bytes:?}");
    }
    let (status, _, _) = send(
        &h,
        "POST",
        "/v1/messages/count_tokens",
        &body,
        &[("x-api-key", "sekrit")],
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_failure_after_the_stream_started_is_an_error_event() {
    let options = HttpOptions {
        request_timeout: Some(Duration::from_millis(300)),
        ..HttpOptions::default()
    };
    let h = Harness::with_options(vec![5], Duration::from_millis(100), options);
    let body = json!({"model": "tiny", "max_tokens": 50, "messages": user("hello"),
                      "stream": true});
    let (status, _, bytes) = post(&h, &body).await;
    assert_eq!(status, StatusCode::OK);
    let evs = typed_events(&bytes);
    let (name, last) = evs.last().unwrap();
    assert_eq!(name, "error");
    assert_eq!(last["error"]["type"], "timeout_error");
    assert_eq!(
        names(&evs)[..3],
        ["message_start", "ping", "content_block_start"]
    );
    assert!(!names(&evs).contains(&"message_stop"));
    // Not streamed, the same deadline is a 504 in Anthropic's shape.
    let mut whole = body.clone();
    whole["stream"] = json!(false);
    let (status, _, bytes) = post(&h, &whole).await;
    assert_eq!(anthropic_error(status, &bytes).1, "timeout_error");
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
}
