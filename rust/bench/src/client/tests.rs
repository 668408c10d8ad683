//! Unit tests of `client.rs`.

use super::*;

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
