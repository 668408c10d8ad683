//! `vrs render` with tools: a parser is needed unless `tool_choice` is `none`, the
//! template or `--tool-call-parser` picks the format, and forced calls show their prefill
//! (demo, hermes) or their JSON constraint (the other formats).

use super::*;

/// The fixture's render state with `parser` as its tool-call parser.
fn state_with_parser(parser: &'static str) -> Arc<RenderState> {
    let f = fixture();
    Arc::new(RenderState {
        tool_parser: Some(parser),
        reasoning_parser: None,
        tokenizer: f.state.tokenizer.clone(),
        template: f.state.template.clone(),
        model_name: f.state.model_name.clone(),
        model_root: f.state.model_root.clone(),
        created: 1,
        max_model_len: f.state.max_model_len,
        vocab_size: f.state.vocab_size,
        middleware: f.state.middleware.clone(),
    })
}

/// The prompt `state` renders for the chat request `body`.
async fn render_prompt(state: &Arc<RenderState>, body: serde_json::Value) -> prompt::Prompt {
    prompt::chat(state, Bytes::from(body.to_string()))
        .await
        .unwrap()
}

#[tokio::test]
async fn tools_need_a_parser_unless_tool_choice_is_none() {
    let f = fixture();
    assert_eq!(
        f.state.tool_parser, None,
        "the tiny template writes no tool markers"
    );
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {}}});
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body = json!({"messages": messages, "tools": [tool], "tool_choice": "none"});
    let (status, out) = call(&f, "POST", "/v1/chat/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let cases = [
        (json!({"tools": [tool]}), "tool_choice"),
        (
            json!({"tools": [tool], "tool_choice": "auto"}),
            "tool_choice",
        ),
        (
            json!({"tools": [tool], "tool_choice": "required"}),
            "tool_choice",
        ),
        (json!({"tools": {"f": 1}}), "tools"),
        (json!({"tools": [{"type": "code"}]}), "tools[0]"),
        (
            json!({"tools": [{"type": "function", "function": {"name": 3}}]}),
            "tools[0].function",
        ),
    ];
    for (extra, param) in cases {
        let mut body = extra.clone();
        body["messages"] = messages.clone();
        let (status, out) = call(&f, "POST", "/v1/chat/completions/render", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{extra}");
        assert_eq!(error_of(&out).1, Some(param), "{out}");
    }
}

#[test]
fn the_template_in_use_picks_the_tool_call_format() {
    assert_eq!(fixture().state.tool_parser, None);
    let hermes = "{% for m in messages %}{{ m.content }}{% endfor %}<tool_call></tool_call>";
    assert_eq!(fixture_with(Some(hermes)).state.tool_parser, Some("hermes"));
}

#[tokio::test]
async fn tool_call_parser_flag_renders_tools_without_markers() {
    let f = fixture_parsers(None, Some("hermes"));
    assert_eq!(f.state.tool_parser, Some("hermes"));
    let tool = json!({"type": "function", "function": {"name": "f", "parameters": {}}});
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body = json!({"messages": messages, "tools": [tool], "tool_choice": "auto"});
    let (status, out) = call(&f, "POST", "/v1/chat/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let body = json!({"messages": messages, "tools": [tool], "tool_choice": "required"});
    let (status, out) = call(&f, "POST", "/v1/chat/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    let prompt = out["prompt"].as_str().unwrap_or_default();
    assert!(prompt.ends_with("<tool_call>"), "{prompt:?}");
    let none = fixture_parsers(Some("<tool_call></tool_call>"), Some("none"));
    assert_eq!(none.state.tool_parser, None);
}

#[tokio::test]
async fn forced_tool_calls_show_their_prefill() {
    let state = state_with_parser("hermes");
    let tool = json!({"type": "function", "function": {"name": "f"}});
    let messages = json!([{"role": "user", "content": "hello"}]);
    let named = json!({"type": "function", "function": {"name": "f"}});
    for (choice, tail) in [
        (json!("required"), "<tool_call>"),
        (named, "<tool_call>{\"name\": \"f\", \"arguments\": "),
    ] {
        let body = json!({"messages": messages, "tools": [tool], "tool_choice": choice});
        let prompt = render_prompt(&state, body).await;
        assert!(
            prompt.text.as_deref().unwrap().ends_with(tail),
            "{prompt:?}"
        );
        let tag = prompt.settings.sampling.structured_outputs.unwrap();
        assert!(tag
            .structural_tag
            .unwrap()
            .contains(r#""value":"}</tool_call>"}"#));
        assert_eq!(prompt.settings.constraint, Some("tools"));
        assert!(prompt.chat.unwrap().prefilled);
    }
    let body = json!({"messages": messages, "tools": [tool], "tool_choice": "auto"});
    let prompt = render_prompt(&state, body).await;
    assert!(!prompt.text.as_deref().unwrap().contains("<tool_call>"));
    assert_eq!(prompt.settings.sampling.structured_outputs, None);
}

#[tokio::test]
async fn other_parsers_force_json_without_a_prefill() {
    let state = state_with_parser("mistral");
    let tool = json!({"type": "function", "function": {"name": "f"}});
    let messages = json!([{"role": "user", "content": "hello"}]);
    let plain = json!({"messages": messages, "tools": [tool], "tool_choice": "none"});
    let plain = render_prompt(&state, plain).await;
    let named = json!({"type": "function", "function": {"name": "f"}});
    for (choice, start) in [(json!("required"), "[\""), (named, "")] {
        let body = json!({"messages": messages, "tools": [tool], "tool_choice": choice});
        let prompt = render_prompt(&state, body).await;
        assert_eq!(prompt.text, plain.text, "no prefill");
        assert!(prompt.settings.stop.is_empty());
        let tag = prompt.settings.sampling.structured_outputs.unwrap();
        let tag = tag.structural_tag.unwrap();
        assert!(tag.contains(start), "{tag}");
        assert_eq!(prompt.settings.constraint, Some("tools"));
        let chat = prompt.chat.unwrap();
        assert!(!chat.prefilled);
        assert_eq!(chat.tool_format, Some(ToolFormat::Mistral));
    }
}
