//! `POST /v1/messages/render`: what the chat render answers for the translated request;
//! errors in Anthropic's shape.

use super::*;

#[tokio::test]
async fn a_messages_body_renders_as_its_chat_translation() {
    let f = fixture_parsers(None, Some("hermes"));
    let body = json!({"model": "tiny", "max_tokens": 5, "system": [{"type": "text", "text": "hello"}],
        "messages": [
            {"role": "user", "content": "hello world"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "foo"},
                {"type": "text", "text": "bar"}]}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}],
        "stop_sequences": ["STOP"], "temperature": 0.5, "top_k": 2});
    let chat = json!({"model": "tiny", "max_tokens": 5, "messages": [
            {"role": "system", "content": "hello"},
            {"role": "user", "content": "hello world"},
            {"role": "assistant", "tool_calls": [{"id": "t1", "type": "function",
                "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
            {"role": "tool", "tool_call_id": "t1", "content": "foo"},
            {"role": "user", "content": [{"type": "text", "text": "bar"}]}],
        "tools": [{"type": "function", "function": {"name": "f",
                   "parameters": {"type": "object"}}}],
        "stop": ["STOP"], "temperature": 0.5, "top_k": 2});
    let (status, mine) = call(&f, "POST", "/v1/messages/render", body).await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    let (status, theirs) = call(&f, "POST", "/v1/chat/completions/render", chat).await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    assert!(mine["request_id"].as_str().unwrap().starts_with("msg-"));
    for key in ["model", "prompt", "prompt_token_ids", "sampling_params"] {
        assert_eq!(mine[key], theirs[key], "{key}");
    }
    assert_eq!(mine["sampling_params"]["max_tokens"], 5);
}

#[tokio::test]
async fn a_bad_messages_body_is_an_anthropic_error() {
    let f = fixture();
    let body = json!({"model": "tiny", "messages": [{"role": "user", "content": "hello"}]});
    let (status, out) = call(&f, "POST", "/v1/messages/render", body).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        out,
        json!({"type": "error", "error": {"type": "invalid_request_error",
                                          "message": "max_tokens: Field required"}})
    );
    let body = json!({"model": "gpt-9", "max_tokens": 1,
                      "messages": [{"role": "user", "content": "hello"}]});
    let (status, out) = call(&f, "POST", "/v1/messages/render", body).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(out["error"]["type"], "not_found_error");
}
