//! The HTTP layer end to end in-process: router + real engine client + fake engine.

use super::*;
use crate::testutil::{call, events, json_of, Harness};
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use serde_json::{json, Value};
use std::time::Duration;
use tower::ServiceExt;

#[tokio::test]
async fn completions_whole_and_streamed() {
    let h = Harness::start(vec![5, 6, 8], Duration::ZERO);
    let (status, ct, body) = call(
        &h,
        "POST",
        "/v1/completions",
        r#"{"model": "tiny", "prompt": "hello world", "max_tokens": 3}"#,
    )
    .await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "application/json"));
    let v = json_of(&body);
    assert_eq!(v["object"], "text_completion");
    assert!(v["id"].as_str().unwrap().starts_with("cmpl-"));
    assert_eq!(v["choices"][0]["text"], " foo bar baz");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );

    let body = r#"{"prompt": [3, 4], "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true}}"#;
    let (status, ct, bytes) = call(&h, "POST", "/v1/completions", body).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let evs = events(&bytes);
    let text: String = evs
        .iter()
        .filter_map(|e| e["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, " foo bar");
    let last_choice = &evs[evs.len() - 2]["choices"][0];
    assert_eq!(last_choice["finish_reason"], "length");
    let usage = evs.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["total_tokens"], 4);
    assert!(evs
        .iter()
        .all(|e| e["object"] == "text_completion" && e["id"] == evs[0]["id"]));
}

#[tokio::test]
async fn chat_whole_and_streamed() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body =
        json!({"model": "tiny", "messages": messages, "max_completion_tokens": 2}).to_string();
    let (status, _, bytes) = call(&h, "POST", "/v1/chat/completions", &body).await;
    assert_eq!(status, StatusCode::OK);
    let v = json_of(&bytes);
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(
        v["choices"][0]["message"],
        json!({"role": "assistant", "content": " foo bar"})
    );
    // "<s> user hello assistant" → 4 tokens.
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
    let sent = &h.engine.added()[0];
    assert_eq!(sent.prompt_token_ids, vec![0, 9, 3, 10]);
    assert_eq!(sent.sampling_params.max_tokens, 2);

    let body = json!({"messages": messages, "max_tokens": 3, "stream": true, "temperature": 0,
                      "stream_options": {"include_usage": true}, "user": "u"})
    .to_string();
    let (_, ct, bytes) = call(&h, "POST", "/v1/chat/completions", &body).await;
    assert_eq!(ct, "text/event-stream");
    let evs = events(&bytes);
    assert_eq!(
        evs[0]["choices"][0]["delta"],
        json!({"role": "assistant", "content": ""})
    );
    assert!(evs.iter().all(|e| e["object"] == "chat.completion.chunk"));
    let text: String = evs
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, " foo bar foo");
    assert_eq!(evs[evs.len() - 2]["choices"][0]["finish_reason"], "length");
    assert_eq!(evs.last().unwrap()["usage"]["completion_tokens"], 3);
}

#[tokio::test]
async fn default_max_tokens_fills_the_context() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let (status, _, _) = call(&h, "POST", "/v1/completions", r#"{"prompt": "hello"}"#).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(h.engine.added()[0].sampling_params.max_tokens, 63);
}

#[tokio::test]
async fn bad_requests_get_error_bodies_and_the_server_goes_on() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let long_prompt = vec!["hello"; 70].join(" ");
    let cases: Vec<(&str, String, u16, Value, &str)> = vec![
        ("/v1/completions", "{not json".into(), 400, Value::Null, "invalid JSON"),
        ("/v1/completions", "[]".into(), 400, Value::Null, "JSON object"),
        ("/v1/completions", "".into(), 400, Value::Null, "empty"),
        ("/v1/completions", r#"{"max_tokens": 3}"#.into(), 400, json!("prompt"), "`prompt` is required"),
        ("/v1/chat/completions", r#"{"model": "tiny"}"#.into(), 400, json!("messages"), "`messages` is required"),
        ("/v1/chat/completions", r#"{"messages": []}"#.into(), 400, json!("messages"), "must not be empty"),
        ("/v1/completions", r#"{"prompt": "x", "max_tokens": "ten"}"#.into(), 400, json!("max_tokens"), "invalid type"),
        ("/v1/completions", r#"{"prompt": "x", "max_tokens": -1}"#.into(), 400, json!("max_tokens"), "at least 1"),
        ("/v1/completions", r#"{"prompt": "x", "temperature": -1}"#.into(), 400, json!("temperature"), ">= 0"),
        ("/v1/completions", r#"{"prompt": "x", "top_p": 0}"#.into(), 400, json!("top_p"), "(0, 1]"),
        ("/v1/completions", r#"{"prompt": "x", "model": "gpt-9"}"#.into(), 404, json!("model"), "`gpt-9` does not exist"),
        ("/v1/completions", format!(r#"{{"prompt": "{long_prompt}"}}"#), 400, json!("prompt"), "maximum context length is 64"),
        ("/v1/completions", r#"{"prompt": "hello", "max_tokens": 64}"#.into(), 400, json!("max_tokens"), "65 tokens"),
        ("/v1/completions", r#"{"prompt": [3, 99]}"#.into(), 400, json!("prompt"), "out of the vocabulary"),
        ("/v1/completions", r#"{"prompt": []}"#.into(), 400, json!("prompt"), "empty list"),
        ("/v1/completions", r#"{"prompt": "x", "n": 0}"#.into(), 400, json!("n"), "`n` must be in [1, 128], got 0"),
        ("/v1/completions", r#"{"prompt": "x", "best_of": 2}"#.into(), 400, json!("best_of"), "`best_of` > 1 is not supported"),
        ("/v1/completions", r#"{"prompt": "x", "max_tokens": 0}"#.into(), 400, json!("max_tokens"), "at least 1"),
        ("/v1/completions", r#"{"prompt": "x", "bogus": 1}"#.into(), 400, json!("bogus"), "unknown field `bogus`"),
        ("/v1/chat/completions", r#"{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function"}]}"#.into(), 400, json!("tools[0].function"), "a tool needs"),
        ("/v1/chat/completions", r#"{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}}"#.into(), 400, json!("response_format"), "`response_format` of type `xml` is not supported"),
        ("/v1/completions", r#"{"prompt": "x", "structured_outputs": {"regex": "a", "choice": ["b"]}}"#.into(), 400, json!("structured_outputs.choice"), "sets `structured_outputs.regex` and `structured_outputs.choice`"),
        ("/v1/completions", r#"{"prompt": "x", "guided_json": 3}"#.into(), 400, json!("guided_json"), "`guided_json` must be a JSON Schema"),
        ("/v1/chat/completions", r#"{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}"#.into(), 400, json!("messages[0].content[0]"), "image_url"),
        ("/v1/chat/completions", r#"{"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"boom": true}}"#.into(), 400, Value::Null, "boom!"),
    ];
    for (path, body, status, param, needle) in cases {
        let (got, ct, bytes) = call(&h, "POST", path, &body).await;
        let v = json_of(&bytes);
        assert_eq!(got.as_u16(), status, "{body}: {v}");
        assert_eq!(ct, "application/json");
        let err = &v["error"];
        assert_eq!(err["code"], status, "{body}");
        assert_eq!(err["param"], param, "{body}: {v}");
        assert!(
            err["message"].as_str().unwrap().contains(needle),
            "{body}: {v}"
        );
        assert!(err["type"].is_string());
        // The server is still fine.
        let (ok, _, _) = call(
            &h,
            "POST",
            "/v1/completions",
            r#"{"prompt": "hello", "max_tokens": 1}"#,
        )
        .await;
        assert_eq!(ok, StatusCode::OK);
    }
    assert!(
        h.engine
            .added()
            .iter()
            .all(|r| r.prompt_token_ids.len() < 10),
        "bad requests never reach the engine"
    );
}

#[tokio::test]
async fn routes_models_and_health() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let (status, _, bytes) = call(&h, "GET", "/v1/models", "").await;
    assert_eq!(status, StatusCode::OK);
    let v = json_of(&bytes);
    assert_eq!(v["data"][0]["id"], "tiny");
    assert_eq!(v["data"][0]["max_model_len"], 64);
    assert_eq!(call(&h, "GET", "/health", "").await.0, StatusCode::OK);
    let (status, _, bytes) = call(&h, "GET", "/v2/nothing", "").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(json_of(&bytes)["error"]["type"], "NotFoundError");
    let (status, _, bytes) = call(&h, "GET", "/v1/chat/completions", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(json_of(&bytes)["error"]["code"], 405);
}

#[tokio::test]
async fn engine_death_gives_503_and_ends_streams_with_an_error_event() {
    let h = Harness::start(vec![5], Duration::from_millis(10));
    let request = Request::post("/v1/completions")
        .body(Body::from(
            r#"{"prompt": "hello", "max_tokens": 60, "stream": true}"#,
        ))
        .unwrap();
    let response = router(Arc::clone(&h.state)).oneshot(request).await.unwrap();
    assert!(h.engine.wait_for(|e| e.added().len() == 1));
    h.engine
        .kill
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let bytes = tokio::time::timeout(Duration::from_secs(10), response.into_body().collect())
        .await
        .unwrap()
        .unwrap()
        .to_bytes();
    let evs = events(&bytes);
    assert_eq!(evs.last().unwrap()["error"]["code"], 503, "{evs:?}");
    let (status, _, bytes) = call(&h, "GET", "/health", "").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(json_of(&bytes)["error"]["message"]
        .as_str()
        .unwrap()
        .contains("fatal error"));
    let (status, _, _) = call(&h, "POST", "/v1/completions", r#"{"prompt": "hello"}"#).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    for method in ["GET", "POST"] {
        let (status, _, bytes) = call(&h, method, "/ping", "").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{method} /ping");
        assert_eq!(json_of(&bytes)["error"]["type"], "ServiceUnavailableError");
    }
}

#[tokio::test]
async fn client_disconnect_aborts_the_engine_request() {
    let h = Harness::start(vec![5], Duration::from_millis(10));
    let request = Request::post("/v1/chat/completions")
        .body(Body::from(r#"{"messages": [{"role": "user", "content": "hello"}], "max_tokens": 60, "stream": true}"#))
        .unwrap();
    let response = router(Arc::clone(&h.state)).oneshot(request).await.unwrap();
    let mut body = response.into_body();
    for _ in 0..3 {
        body.frame().await.unwrap().unwrap();
    }
    drop(body);
    let id = h.engine.added()[0].request_id.clone();
    assert!(id.starts_with("chatcmpl-"));
    assert!(h.engine.wait_for(|e| e.aborted() == [id.clone()]));
    assert_eq!(h.client.in_flight(), 0);
}

#[tokio::test]
async fn oversized_bodies_get_413() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = format!(r#"{{"prompt": "{}"}}"#, "a".repeat(MAX_BODY_BYTES));
    let (status, ct, bytes) = call(&h, "POST", "/v1/completions", &body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(ct, "application/json");
    let v = json_of(&bytes);
    assert_eq!(v["error"]["code"], 413);
    assert_eq!(
        v["error"]["message"],
        "request body is larger than the limit of 32 MiB (32 MiB = 33554432 bytes); \
         raise --max-request-body"
    );
}

#[tokio::test]
async fn ping_answers_get_and_post() {
    let h = Harness::start(vec![5], Duration::ZERO);
    for method in ["GET", "POST"] {
        let (status, _, bytes) = call(&h, method, "/ping", "").await;
        assert_eq!((status, bytes.len()), (StatusCode::OK, 0), "{method} /ping");
    }
    let (status, _, bytes) = call(&h, "PUT", "/ping", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(json_of(&bytes)["error"]["code"], 405);
}

#[tokio::test]
async fn invocations_route_by_the_body() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let chat = r#"{"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2}"#;
    let (status, ct, bytes) = call(&h, "POST", "/invocations", chat).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "application/json"));
    let v = json_of(&bytes);
    assert_eq!(v["object"], "chat.completion");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["choices"][0]["message"]["content"], " foo bar");
    let body = r#"{"prompt": [3, 4], "max_tokens": 2, "stream": true}"#;
    let (status, ct, bytes) = call(&h, "POST", "/invocations", body).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let evs = events(&bytes);
    assert!(evs.iter().all(
        |e| e["object"] == "text_completion" && e["id"].as_str().unwrap().starts_with("cmpl-")
    ));
    let text: String = evs
        .iter()
        .filter_map(|e| e["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, " foo bar");
    let ids: Vec<String> = h
        .engine
        .added()
        .iter()
        .map(|r| r.request_id.clone())
        .collect();
    assert!(
        ids[0].starts_with("chatcmpl-") && ids[1].starts_with("cmpl-"),
        "{ids:?}"
    );
    let cases = [
        (r#"{"model": "tiny"}"#, Value::Null, invocations::NO_HANDLER),
        (r#"{"messages": ["#, Value::Null, "invalid JSON"),
        ("[1]", Value::Null, "must be a JSON object"),
        (
            r#"{"messages": []}"#,
            json!("messages"),
            "must not be empty",
        ),
        (
            r#"{"prompt": "x", "temperature": -1}"#,
            json!("temperature"),
            "got -1",
        ),
        (
            r#"{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 99}"#,
            json!("max_completion_tokens"),
            "maximum context length is 64",
        ),
    ];
    for (body, param, needle) in cases {
        let (status, _, bytes) = call(&h, "POST", "/invocations", body).await;
        let v = json_of(&bytes);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(v["error"]["param"], param, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {v}");
    }
    let (status, _, _) = call(&h, "GET", "/invocations", "").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(
        h.engine.added().len(),
        2,
        "bad requests never reach the engine"
    );
}

mod bad_requests;
mod beam_search;
mod cached;
mod engine_fields;
mod extras;
mod keep_alive;
mod load;
mod loopback;
mod pooling;
mod queue;
mod structured;
