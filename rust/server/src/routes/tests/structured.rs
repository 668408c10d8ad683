//! Structured outputs through the serving router and the fake engine: the spec reaches
//! every engine request, an engine refusal is a 400 (streamed or not, before any head),
//! an engine failure stays a 500 / in-stream error, and constrained chat is all content.

use super::*;
use crate::state::HttpOptions;
use vrs_engine_client::fake::{FAILING_REGEX, INVALID_MESSAGE, INVALID_REGEX};
use vrs_wire::StructuredOutputs;

fn specs(h: &Harness) -> Vec<Option<StructuredOutputs>> {
    h.engine
        .added()
        .into_iter()
        .map(|r| r.sampling_params.structured_outputs)
        .collect()
}

#[tokio::test]
async fn every_engine_request_carries_the_spec() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let body = json!({"prompt": ["hello", "world"], "n": 2, "max_tokens": 2,
                      "structured_outputs": {"json": "{\"b\": 1, \"a\": {}}"}});
    let (status, _, bytes) = call(&h, "POST", "/v1/completions", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));
    let expected = StructuredOutputs {
        json: Some(r#"{"b":1,"a":{}}"#.into()),
        ..Default::default()
    };
    assert_eq!(specs(&h), vec![Some(expected); 4]);
    // Chat, streamed: response_format json_schema as compact text.
    let body = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2,
        "stream": true, "response_format": {"type": "json_schema",
        "json_schema": {"name": "n", "strict": true, "schema": {"type": "object", "title": "é"}}}});
    let (status, ct, bytes) = call(&h, "POST", "/v1/chat/completions", &body.to_string()).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let text: String = events(&bytes)
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, " foo bar");
    let sent = specs(&h).pop().flatten().unwrap();
    assert_eq!(
        sent.json.as_deref(),
        Some(r#"{"type":"object","title":"é"}"#)
    );
    // Unconstrained requests carry none.
    call(
        &h,
        "POST",
        "/v1/completions",
        r#"{"prompt": "x", "max_tokens": 1}"#,
    )
    .await;
    assert_eq!(specs(&h).pop().unwrap(), None);
}

#[tokio::test]
async fn a_refused_spec_is_a_400_streamed_or_not() {
    let h = Harness::start(vec![5, 6], Duration::from_millis(5));
    let regex = json!({"regex": INVALID_REGEX});
    let chat = json!([{"role": "user", "content": "hello"}]);
    let bodies = [
        (
            "/v1/completions",
            json!({"prompt": "hello", "structured_outputs": regex}),
        ),
        (
            "/v1/completions",
            json!({"prompt": ["hello", "world"], "n": 2, "stream": true,
                                   "structured_outputs": regex}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": chat, "structured_outputs": regex}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": chat, "stream": true, "n": 3,
                                        "stream_options": {"include_usage": true},
                                        "structured_outputs": regex}),
        ),
    ];
    for (path, body) in bodies {
        let (status, ct, bytes) = call(&h, "POST", path, &body.to_string()).await;
        let v = json_of(&bytes);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {v}");
        assert_eq!(ct, "application/json", "{body}");
        assert_eq!(
            v["error"],
            json!({"message": INVALID_MESSAGE, "type": "BadRequestError",
                   "param": "structured_outputs.regex", "code": 400}),
            "{body}"
        );
    }
    // The server goes on.
    let (status, _, _) = call(
        &h,
        "POST",
        "/v1/completions",
        r#"{"prompt": "x", "max_tokens": 1}"#,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn an_engine_failure_stays_a_500_and_an_in_stream_error() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = json!({"prompt": "hello", "structured_outputs": {"regex": FAILING_REGEX}});
    let (status, _, bytes) = call(&h, "POST", "/v1/completions", &body.to_string()).await;
    assert_eq!(status.as_u16(), 500, "{}", json_of(&bytes));
    let body = json!({"prompt": "hello", "stream": true,
                      "structured_outputs": {"regex": FAILING_REGEX}});
    let (status, ct, bytes) = call(&h, "POST", "/v1/completions", &body.to_string()).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let evs = events(&bytes);
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0]["error"]["message"], "grammar backend crashed");
    assert_eq!(evs[0]["error"]["code"], 500);
}

#[tokio::test]
async fn a_constrained_stream_starts_with_its_first_output() {
    let h = Harness::start(vec![5, 6, 8], Duration::from_millis(5));
    let body = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 3,
        "n": 2, "stream": true, "stream_options": {"include_usage": true},
        "structured_outputs": {"choice": ["foo bar baz"]}});
    let (status, ct, bytes) = call(&h, "POST", "/v1/chat/completions", &body.to_string()).await;
    assert_eq!((status, ct.as_str()), (StatusCode::OK, "text/event-stream"));
    let evs = events(&bytes);
    for index in 0..2 {
        let mine: Vec<&Value> = evs
            .iter()
            .filter(|e| e["choices"][0]["index"] == index)
            .collect();
        assert_eq!(
            mine[0]["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        let text: String = mine
            .iter()
            .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
            .collect();
        assert_eq!(text, " foo bar baz", "choice {index}");
    }
    assert_eq!(evs.last().unwrap()["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn constrained_chat_is_all_content() {
    let options = HttpOptions {
        reasoning_parser: Some("qwen3"),
        ..HttpOptions::default()
    };
    let h = Harness::with_options(vec![5, 6], Duration::ZERO, options);
    // The prompt leaves a <think> open: unconstrained, the answer is reasoning.
    let messages = json!([{"role": "user", "content": "hello <think>"}]);
    let plain = json!({"messages": messages, "max_tokens": 2});
    let (_, _, bytes) = call(&h, "POST", "/v1/chat/completions", &plain.to_string()).await;
    let message = &json_of(&bytes)["choices"][0]["message"];
    assert_eq!(message["reasoning_content"], " foo bar", "{message}");
    let constrained = json!({"messages": messages, "max_tokens": 2,
                             "response_format": {"type": "json_object"}});
    let (_, _, bytes) = call(&h, "POST", "/v1/chat/completions", &constrained.to_string()).await;
    let message = &json_of(&bytes)["choices"][0]["message"];
    assert_eq!(message["content"], " foo bar", "{message}");
    assert!(
        message.get("reasoning_content").is_none_or(Value::is_null),
        "{message}"
    );
}

#[tokio::test]
async fn forced_tool_calls_carry_their_tag() {
    let options = HttpOptions {
        tool_call_parser: Some("hermes"),
        ..HttpOptions::default()
    };
    let h = Harness::with_options(vec![5], Duration::ZERO, options);
    let tool = json!({"type": "function", "function": {"name": "f"}});
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body = json!({"messages": messages, "tools": [tool], "tool_choice": "required",
                      "parallel_tool_calls": false, "max_tokens": 1});
    let (status, _, _) = call(&h, "POST", "/v1/chat/completions", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let tag = specs(&h).pop().flatten().unwrap().structural_tag.unwrap();
    assert_eq!(
        tag,
        r#"{"type":"structural_tag","format":{"type":"sequence","elements":[{"type":"const_string","value":"{\"name\": \"f\", \"arguments\": "},{"type":"json_schema","json_schema":{"type":"object","properties":{}},"max_whitespace_cnt":1},{"type":"const_string","value":"}</tool_call>"}]}}"#
    );
    // Auto constrains nothing; a forcing choice with a constraint is refused.
    let body =
        json!({"messages": messages, "tools": [tool], "tool_choice": "auto", "max_tokens": 1});
    call(&h, "POST", "/v1/chat/completions", &body.to_string()).await;
    assert_eq!(specs(&h).pop().unwrap(), None);
    let body = json!({"messages": messages, "tools": [tool],
                      "tool_choice": {"type": "function", "function": {"name": "f"}},
                      "structured_outputs": {"grammar": "root ::= \"a\""}});
    let (param, message) =
        crate::testutil::bad_request(&h, "/v1/chat/completions", &body.to_string()).await;
    assert_eq!(param, "tool_choice");
    assert_eq!(
        message,
        "`tool_choice` naming `f` cannot be combined with `structured_outputs.grammar`"
    );
}
