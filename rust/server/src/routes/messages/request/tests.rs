use serde_json::{json, Value};

use super::*;

/// A server with a reasoning parser (or not) whose template takes no late system message.
fn server(reasoning: bool) -> Server {
    Server {
        reasoning,
        merge_system: true,
    }
}

fn chat(body: Value) -> Value {
    translate(body.to_string().as_bytes(), Mode::Create, server(true))
        .unwrap_or_else(|e| panic!("{body}: {e:?}"))
}

/// The 400's (param, message).
fn refused(body: Value, mode: Mode, reasoning: bool) -> (String, String) {
    match translate(body.to_string().as_bytes(), mode, server(reasoning)) {
        Err(ApiError::BadRequest { message, param }) => (param.unwrap_or_default(), message),
        other => panic!("{body}: {other:?}"),
    }
}

fn bad(body: Value) -> (String, String) {
    refused(body, Mode::Create, true)
}

fn base() -> Value {
    json!({"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
}

fn with(key: &str, value: Value) -> Value {
    let mut body = base();
    body[key] = value;
    body
}

#[test]
fn a_plain_request_becomes_the_chat_request() {
    let body = json!({"model": "m", "max_tokens": 16, "system": [{"type": "text", "text": "a"},
        {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
        "stop_sequences": ["x"], "temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": 7,
        "stream": true, "metadata": {"user_id": "u1"}, "service_tier": "auto"});
    assert_eq!(
        chat(body),
        json!({"model": "m",
               "messages": [{"role": "system", "content": "ab"},
                            {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
               "max_tokens": 16, "stop": ["x"], "temperature": 0.5, "top_p": 0.9, "top_k": 3,
               "seed": 7, "stream": true, "user": "u1"})
    );
}

#[test]
fn a_tool_loop_becomes_tool_calls_and_tool_messages() {
    let body = with(
        "messages",
        json!([
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "let me", "signature": "s"},
                {"type": "thinking", "thinking": " see"},
                {"type": "tool_use", "id": "t1", "name": "get", "input": {"b": 1, "a": "é"}},
                {"type": "tool_use", "id": "t2", "name": "get", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t2", "content": [
                    {"type": "text", "text": "x"}, {"type": "text", "text": "y"}]},
                {"type": "text", "text": "and?"},
                {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": true}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1"}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"}]}
        ]),
    );
    let call = |id: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": "get", "arguments": args}});
    assert_eq!(
        chat(body)["messages"],
        json!([
            {"role": "user", "content": "weather?"},
            {"role": "assistant",
             "tool_calls": [call("t1", "{\"b\":1,\"a\":\"é\"}"), call("t2", "{}")],
             "reasoning_content": "let me see"},
            {"role": "tool", "tool_call_id": "t2", "content": "x\ny"},
            {"role": "tool", "tool_call_id": "t1", "content": "Error: boom"},
            {"role": "user", "content": [{"type": "text", "text": "and?"}]},
            {"role": "tool", "tool_call_id": "t1", "content": ""},
            {"role": "assistant", "content": [], "reasoning_content": "t"}
        ])
    );
}

#[test]
fn tools_and_tool_choice_become_chat_functions() {
    let mut body = with(
        "tools",
        json!([{"name": "f", "description": "d", "input_schema": {"type": "object"}},
               {"type": "custom", "name": "g", "input_schema": {}}]),
    );
    body["tool_choice"] = json!({"type": "tool", "name": "g", "disable_parallel_tool_use": true});
    let out = chat(body.clone());
    assert_eq!(
        out["tools"],
        json!([{"type": "function", "function": {"name": "f", "description": "d",
                                                  "parameters": {"type": "object"}}},
               {"type": "function", "function": {"name": "g", "parameters": {}}}])
    );
    assert_eq!(
        out["tool_choice"],
        json!({"type": "function", "function": {"name": "g"}})
    );
    assert_eq!(out["parallel_tool_calls"], false);
    for (anthropic, openai) in [("auto", "auto"), ("any", "required"), ("none", "none")] {
        body["tool_choice"] = json!({"type": anthropic});
        let out = chat(body.clone());
        assert_eq!(out["tool_choice"], openai);
        assert!(out.get("parallel_tool_calls").is_none());
    }
}

#[test]
fn thinking_sets_the_template_switch() {
    let enabled = with(
        "thinking",
        json!({"type": "enabled", "budget_tokens": 1024}),
    );
    let mut enabled = enabled;
    enabled["max_tokens"] = json!(2000);
    assert_eq!(
        chat(enabled.clone())["chat_template_kwargs"],
        json!({"enable_thinking": true})
    );
    // The budget is the chat request's, enforced by the engine (vLLM's mapping).
    assert_eq!(chat(enabled.clone())["thinking_token_budget"], json!(1024));
    let disabled = with("thinking", json!({"type": "disabled"}));
    let off = translate(disabled.to_string().as_bytes(), Mode::Create, server(false)).unwrap();
    assert_eq!(
        off["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    assert!(off.get("thinking_token_budget").is_none());
    assert_eq!(
        refused(enabled, Mode::Create, false),
        (
            "thinking".into(),
            "thinking needs a reasoning parser: start the server with --reasoning-parser".into()
        )
    );
}

#[test]
fn count_tokens_needs_no_max_tokens_and_refuses_stream() {
    let mut body = base();
    body.as_object_mut().unwrap().remove("max_tokens");
    let out = translate(
        body.to_string().as_bytes(),
        Mode::CountTokens,
        server(false),
    )
    .unwrap();
    assert!(out.get("max_tokens").is_none());
    body["max_tokens"] = json!(5);
    let out = translate(
        body.to_string().as_bytes(),
        Mode::CountTokens,
        server(false),
    )
    .unwrap();
    assert!(out.get("max_tokens").is_none(), "checked, not rendered");
    body["max_tokens"] = json!(0);
    assert_eq!(
        refused(body.clone(), Mode::CountTokens, false).0,
        "max_tokens"
    );
    body["stream"] = json!(false);
    assert_eq!(
        refused(body, Mode::CountTokens, false),
        (
            "stream".into(),
            "stream is not supported by count_tokens".into()
        )
    );
}

#[test]
fn every_refusal_names_its_field() {
    let mut no_max = base();
    no_max.as_object_mut().unwrap().remove("max_tokens");
    let mut no_model = base();
    no_model.as_object_mut().unwrap().remove("model");
    let msg = |content: Value| with("messages", json!([{"role": "user", "content": content}]));
    let asst = |content: Value| {
        with(
            "messages",
            json!([{"role": "user", "content": "q"}, {"role": "assistant", "content": content}]),
        )
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (no_max, "max_tokens", "Field required"),
        (no_model, "model", "Field required"),
        (with("max_tokens", json!(0)), "max_tokens", "invalid value: expected an integer >= 1"),
        (with("max_tokens", json!("9")), "max_tokens", "invalid value: expected an integer >= 1"),
        (with("messages", json!([])), "messages", "at least one message is required"),
        (with("messages", json!("hi")), "messages", "invalid value: expected a list"),
        (with("bogus", json!(1)), "bogus", "unknown field 'bogus'"),
        (with("container", json!("c")), "container", "container is not supported by this server"),
        (with("mcp_servers", json!([])), "mcp_servers", "mcp_servers is not supported by this server"),
        (with("context_management", json!({})), "context_management", "context_management is not supported by this server"),
        (with("system", json!([{"type": "image"}])), "system[0].type", "content block type 'image' is not supported"),
        (with("system", json!(3)), "system", "invalid value: expected a string or a list of text blocks"),
        (with("messages", json!([{"role": "tool", "content": "x"}])), "messages[0].role", "invalid value: expected 'user', 'assistant' or 'system', got 'tool'"),
        (with("messages", json!([{"role": "user", "content": "x", "name": "n"}])), "messages[0].name", "unknown field 'name'"),
        (with("messages", json!([{"role": "user"}])), "messages[0].content", "Field required"),
        (msg(json!([])), "messages[0].content", "at least one content block is required"),
        (msg(json!([{"text": "x"}])), "messages[0].content[0].type", "Field required"),
        (msg(json!([{"type": "image", "source": {}}])), "messages[0].content[0].type", "content block type 'image' is not supported"),
        (msg(json!([{"type": "document"}])), "messages[0].content[0].type", "content block type 'document' is not supported"),
        (msg(json!([{"type": "text", "text": 1}])), "messages[0].content[0].text", "invalid value: expected a string"),
        (msg(json!([{"type": "text", "text": "a", "x": 1}])), "messages[0].content[0].x", "unknown field 'x'"),
        (msg(json!([{"type": "tool_result", "tool_use_id": "nope"}])), "messages[0].content[0].tool_use_id", "tool_result for unknown tool_use_id 'nope'"),
        (msg(json!([{"type": "tool_use", "id": "a", "name": "f", "input": {}}])), "messages[0].content[0].type", "content block type 'tool_use' is not supported in a user message"),
        (msg(json!([{"type": "redacted_thinking", "data": "x"}])), "messages[0].content[0].type", "content block type 'redacted_thinking' is not supported in a user message"),
        (asst(json!([{"type": "tool_result", "tool_use_id": "a"}])), "messages[1].content[0].type", "content block type 'tool_result' is not supported in an assistant message"),
        (asst(json!([{"type": "tool_use", "id": "a", "name": "f", "input": []}])), "messages[1].content[0].input", "invalid value: expected an object"),
        (asst(json!([{"type": "tool_use", "name": "f", "input": {}}])), "messages[1].content[0].id", "Field required"),
        (with("tools", json!([{"type": "web_search_20250305", "name": "web_search"}])), "tools[0].type", "tool type 'web_search_20250305' is not supported: only custom tools (name, description, input_schema)"),
        (with("tools", json!([{"name": "f"}])), "tools[0].input_schema", "Field required"),
        (with("tool_choice", json!({"type": "required"})), "tool_choice.type", "invalid value: expected 'auto', 'any', 'tool' or 'none', got 'required'"),
        (with("tool_choice", json!({"type": "tool"})), "tool_choice.name", "Field required"),
        (with("tool_choice", json!({"type": "none", "disable_parallel_tool_use": true})), "tool_choice.disable_parallel_tool_use", "unknown field 'disable_parallel_tool_use'"),
        (with("stop_sequences", json!(["a", 1])), "stop_sequences[1]", "invalid value: expected a string"),
        (with("temperature", json!("hot")), "temperature", "invalid value: expected a number"),
        (with("top_k", json!(-1)), "top_k", "invalid value: expected an integer >= 0"),
        (with("seed", json!(1.5)), "seed", "invalid value: expected an integer"),
        (with("stream", json!("yes")), "stream", "invalid value: expected a boolean"),
        (with("metadata", json!({"user_id": "u", "org": "o"})), "metadata.org", "unknown field 'org'"),
        (with("thinking", json!({"type": "sometimes"})), "thinking.type", "invalid value: expected 'enabled', 'disabled' or 'adaptive', got 'sometimes'"),
        (with("thinking", json!({"type": "enabled", "budget_tokens": 100})), "thinking.budget_tokens", "invalid value: expected an integer >= 1024"),
        (with("thinking", json!({"type": "enabled", "budget_tokens": 1024})), "thinking.budget_tokens", "budget_tokens (1024) must be less than max_tokens (16)"),
    ];
    for (body, param, message) in cases {
        assert_eq!(
            bad(body.clone()),
            (param.to_owned(), message.to_owned()),
            "{body}"
        );
    }
}

#[test]
fn unknown_fields_come_before_refused_ones_in_body_order() {
    let body = br#"{"container": "c", "zz": 1, "aa": 2, "max_tokens": 1}"#;
    match translate(body, Mode::Create, server(false)) {
        Err(ApiError::BadRequest { param, .. }) => assert_eq!(param.as_deref(), Some("zz")),
        other => panic!("{other:?}"),
    }
    assert!(translate(b"[]", Mode::Create, server(false)).is_err());
    assert!(translate(b"{", Mode::Create, server(false)).is_err());
}
