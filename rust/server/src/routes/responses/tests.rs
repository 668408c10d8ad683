//! `/v1/responses` through the serving router and the fake engine, its render route
//! through the render router, and the stored-response routes.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{json, Value};
use tower::ServiceExt;

use crate::args::{RenderArgs, RenderSpecific};
use crate::lifecycle::render::load;
use crate::testutil::{call, json_of, tiny_model_dir, Harness, MAX_MODEL_LEN};

/// The typed events of an SSE body (no `[DONE]`); checks framing and sequence numbers.
fn typed_events(bytes: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(bytes).unwrap();
    assert!(text.ends_with("\n\n") && !text.contains("[DONE]"), "{text}");
    let events: Vec<Value> = text
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (head, data) = e.split_once('\n').unwrap();
            let v: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(head.strip_prefix("event: "), v["type"].as_str(), "{e}");
            v
        })
        .collect();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["sequence_number"], i, "{e}");
    }
    events
}

fn kinds(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_whole_response() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let body = json!({"model": "tiny", "input": "hello", "max_output_tokens": 2,
                      "instructions": null, "metadata": {"a": "b"}, "store": false});
    let (status, ct, bytes) = call(&h, "POST", "/v1/responses", &body.to_string()).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "application/json"));
    let v = json_of(&bytes);
    let id = v["id"].as_str().unwrap();
    let sent = &h.engine.added()[0];
    assert_eq!(
        id.strip_prefix("resp_"),
        sent.request_id.strip_prefix("resp-")
    );
    assert_eq!(id.len(), 5 + 32);
    assert_eq!(sent.prompt_token_ids, vec![0, 9, 3, 10]);
    assert_eq!(sent.sampling_params.max_tokens, 2);
    assert_eq!(
        (v["status"].as_str(), v["object"].as_str()),
        (Some("incomplete"), Some("response"))
    );
    assert_eq!(
        v["incomplete_details"],
        json!({"reason": "max_output_tokens"})
    );
    let output = v["output"].as_array().unwrap();
    assert_eq!(output.len(), 1);
    assert!(output[0]["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(
        output[0]["content"],
        json!([{"type": "output_text", "text": " foo bar", "annotations": [], "logprobs": []}])
    );
    assert_eq!(
        v["usage"],
        json!({"input_tokens": 4, "input_tokens_details": {"cached_tokens": 0,
                                                              "cache_write_tokens": 0},
               "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0},
               "total_tokens": 6})
    );
    assert_eq!(
        (v["max_output_tokens"].as_u64(), &v["metadata"]),
        (Some(2), &json!({"a": "b"}))
    );
    assert_eq!(
        (v["model"].as_str(), &v["instructions"]),
        (Some("tiny"), &Value::Null)
    );
    // A stop string: completed.
    let body = json!({"input": "hello", "stop": ["bar"], "instructions": "be"});
    let (status, _, bytes) = call(&h, "POST", "/v1/responses", &body.to_string()).await;
    let v = json_of(&bytes);
    assert_eq!(
        (status, v["status"].as_str()),
        (StatusCode::OK, Some("completed")),
        "{v}"
    );
    assert_eq!(v["incomplete_details"], Value::Null);
    assert_eq!(v["output"][0]["content"][0]["text"], " foo ");
    assert_eq!(v["instructions"], "be");
    // "<s> system be <s> user hello assistant"
    assert_eq!(h.engine.added()[1].prompt_token_ids.len(), 7);
}

#[tokio::test]
async fn a_streamed_response_in_event_order() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let body = json!({"input": [{"role": "user", "content": "hello"}], "stream": true,
                      "stream_options": {"include_obfuscation": false}, "stop": ["bar"],
                      "temperature": 0.5});
    let (status, ct, bytes) = call(&h, "POST", "/v1/responses", &body.to_string()).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let events = typed_events(&bytes);
    let mut expected = vec![
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ];
    let deltas = kinds(&events)
        .iter()
        .filter(|k| **k == "response.output_text.delta")
        .count();
    assert!(deltas >= 1);
    expected.extend(std::iter::repeat("response.output_text.delta").take(deltas));
    expected.extend([
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]);
    assert_eq!(kinds(&events), expected);
    let created = &events[0]["response"];
    assert_eq!(created["status"], "in_progress");
    assert_eq!(
        (&created["output"], &created["usage"]),
        (&json!([]), &Value::Null)
    );
    assert_eq!(created["temperature"], 0.5);
    let text: String = events.iter().filter_map(|e| e["delta"].as_str()).collect();
    assert_eq!(text, " foo ");
    let done = &events.last().unwrap()["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["output"][0]["content"][0]["text"], " foo ");
    assert_eq!(done["id"], created["id"]);
    assert_eq!(done["usage"]["input_tokens"], 4);
}

#[tokio::test]
async fn an_engine_failure_mid_stream_is_an_error_event() {
    let h = Harness::start(vec![5], Duration::from_millis(10));
    let request = Request::post("/v1/responses")
        .body(Body::from(
            r#"{"input": "hello", "max_output_tokens": 50, "stream": true}"#,
        ))
        .unwrap();
    let response = crate::routes::router(std::sync::Arc::clone(&h.state))
        .oneshot(request)
        .await
        .unwrap();
    assert!(h.engine.wait_for(|e| e.added().len() == 1));
    h.engine
        .kill
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let bytes = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    let events = typed_events(&bytes);
    let last = events.last().unwrap();
    let keys: Vec<&str> = last
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["type", "sequence_number", "code", "message", "param"]
    );
    assert_eq!(
        (last["type"].as_str(), last["code"].as_str()),
        (Some("error"), Some("ServiceUnavailableError"))
    );
    assert_eq!(last["param"], Value::Null);
}

#[tokio::test]
async fn bad_requests_are_400s_naming_the_field() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let cases = [
        (
            json!({"input": "x", "store": "yes"}),
            json!("store"),
            "expected a boolean",
        ),
        (
            json!({"input": "x", "background": true}),
            json!("background"),
            "does not support the background mode",
        ),
        (
            json!({"input": "x", "bogus": 1}),
            json!("bogus"),
            "unknown field 'bogus'",
        ),
        (
            json!({"input": "x", "tools": [{"type": "web_search"}]}),
            json!("tools[0].type"),
            "built-in tool 'web_search'",
        ),
        (
            json!({"input": [{"type": "function_call_output", "call_id": "c", "output": "o"}]}),
            json!("input[0].call_id"),
            "unknown call_id 'c'",
        ),
        (
            json!({"input": [{"role": "user", "content": [{"type": "input_image"}]}]}),
            json!("input[0].content[0].type"),
            "content part type 'input_image' is not supported",
        ),
        (
            json!({"input": "x", "reasoning": {"effort": "huge"}}),
            json!("reasoning.effort"),
            "`reasoning_effort` must be one of",
        ),
        (json!({}), json!("input"), "'input' is required"),
        // The chat path's checks, naming the Responses fields.
        (
            json!({"input": "x", "temperature": -1}),
            json!("temperature"),
            "got -1",
        ),
        (
            json!({"input": "x", "max_output_tokens": 99}),
            json!("max_output_tokens"),
            "maximum context length is 64",
        ),
        (
            json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "n",
                                                  "schema": []}}}),
            json!("text.format.schema"),
            "expected an object",
        ),
        (
            json!({"input": "x", "tools": [{"type": "function", "name": "f"}]}),
            json!("tool_choice"),
            "needs a tool-call parser",
        ),
    ];
    for (body, param, needle) in cases {
        let (status, ct, bytes) = call(&h, "POST", "/v1/responses", &body.to_string()).await;
        let v = json_of(&bytes);
        assert_eq!(
            (status, ct.as_str()),
            (StatusCode::BAD_REQUEST, "application/json"),
            "{body}: {v}"
        );
        assert_eq!(v["error"]["type"], "BadRequestError", "{v}");
        assert_eq!(v["error"]["param"], param, "{body}: {v}");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(needle),
            "{body}: {v}"
        );
    }
    let (status, _, bytes) = call(
        &h,
        "POST",
        "/v1/responses",
        r#"{"input": "x", "model": "gpt"}"#,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(json_of(&bytes)["error"]["param"], "model");
    assert!(
        h.engine.added().is_empty(),
        "bad requests never reach the engine"
    );
}

#[tokio::test]
async fn stored_response_routes_are_404s_without_the_store() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let routes = [
        ("GET", "/v1/responses/resp_abc"),
        ("DELETE", "/v1/responses/resp_abc"),
        ("POST", "/v1/responses/resp_abc/cancel"),
        ("GET", "/v1/responses/resp_abc/input_items"),
    ];
    for (method, path) in routes {
        let (status, _, bytes) = call(&h, method, path, "").await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(
            json_of(&bytes),
            json!({"error": {"message": "Response with id 'resp_abc' not found.",
                   "type": "NotFoundError", "param": "response_id", "code": 404}})
        );
    }
    let (status, _, _) = call(&h, "PUT", "/v1/responses/resp_abc", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    let (status, _, _) = call(&h, "GET", "/v1/responses", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
}

/// The render router on the tiny model, with `--chat-template` `template` when given.
async fn render(template: Option<&str>, path: &str, body: &Value) -> (StatusCode, Value) {
    let dir = tiny_model_dir();
    let chat_template = template.map(|source| {
        let file = dir.path().join("override.jinja");
        std::fs::write(&file, source).unwrap();
        file.display().to_string()
    });
    let config = json!({"vocab_size": 11, "max_position_embeddings": 4096});
    std::fs::write(dir.path().join("config.json"), config.to_string()).unwrap();
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
            tool_call_parser: None,
            reasoning_parser: None,
        },
    };
    let state = std::sync::Arc::new(load(&args).unwrap());
    let request = Request::post(path)
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = crate::routes::render_router(state)
        .oneshot(request)
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, json_of(&bytes))
}

#[tokio::test]
async fn the_render_route_renders_the_translated_chat_request() {
    let input = json!([
        {"role": "user", "content": "hello"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "world"},
    ]);
    let body = json!({"input": input, "instructions": "foo", "max_output_tokens": 3,
                      "temperature": 0, "tools": [{"type": "function", "name": "f"}],
                      "tool_choice": "none"});
    let (status, out) = render(None, "/v1/responses/render", &body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert!(out["request_id"].as_str().unwrap().starts_with("resp-"));
    let chat = json!({"messages": [
        {"role": "system", "content": "foo"}, {"role": "user", "content": "hello"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "world"}],
        "max_completion_tokens": 3, "temperature": 0,
        "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"});
    let (_, expected) = render(None, "/v1/chat/completions/render", &chat).await;
    for key in ["model", "prompt", "prompt_token_ids", "sampling_params"] {
        assert_eq!(out[key], expected[key], "{key}");
    }
    assert_eq!(out["sampling_params"]["max_tokens"], 3);
    // reasoning.effort reaches the template as chat's reasoning_effort (vLLM's rule).
    let template = "{% for m in messages %}{{ m.content }} {% endfor %}{{ reasoning_effort }} \
                    {{ enable_thinking }}";
    let body = json!({"input": "hello", "reasoning": {"effort": "minimal"}});
    let (status, out) = render(Some(template), "/v1/responses/render", &body).await;
    assert_eq!(
        (status, out["prompt"].as_str()),
        (StatusCode::OK, Some("hello minimal True")),
        "{out}"
    );
    // A template that reads no effort renders without it: no refusal, as vLLM.
    let (status, out) = render(None, "/v1/responses/render", &body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let body = json!({"input": "hello", "reasoning": {"effort": "world"}});
    let (status, out) = render(None, "/v1/responses/render", &body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(out["error"]["param"], "reasoning.effort");
}
