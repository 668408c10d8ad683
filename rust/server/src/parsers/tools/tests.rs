use serde_json::{json, Value};

use super::*;

fn settings(mode: ToolMode, name: Option<&str>, parallel: bool) -> ToolSettings {
    ToolSettings {
        tools: Some(vec![
            json!({"type": "function", "function": {"name": "f"}}),
            json!({"type": "function", "function": {"name": "g"}}),
        ]),
        mode,
        name: name.map(str::to_owned),
        parallel,
    }
}

/// Feeds `text` one char at a time, accumulating the deltas.
fn run(parser: &mut ToolCallParser, text: &str) -> (String, Vec<ToolCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut deltas: Vec<ToolDelta> = text.chars().map(|c| parser.push(&c.to_string())).collect();
    deltas.push(parser.finish());
    for delta in deltas {
        content.push_str(&delta.content);
        ToolCall::accumulate(&mut calls, &delta.calls);
    }
    (content, calls)
}

#[test]
fn demo_splits_content_and_calls_across_any_piece_boundary() {
    let text = "Hi <｜tool▁call▁begin｜>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\
                <｜tool▁call▁end｜> bye <｜tool▁call▁begin｜>{bad}<｜tool▁call▁end｜>";
    let mut parser = ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Auto, None, true));
    let (content, calls) = run(&mut parser, text);
    assert_eq!(
        content,
        "Hi bye <｜tool▁call▁begin｜>{bad}<｜tool▁call▁end｜>"
    );
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "f");
    assert_eq!(calls[0].arguments, "{\"a\": [1, 2]}");
    assert!(calls[0].id.starts_with("call_") && calls[0].id.len() == 29);
}

#[test]
fn arguments_stream_in_pieces_after_a_first_delta_with_id_and_name() {
    let mut parser = ToolCallParser::new(ToolFormat::Hermes, &settings(ToolMode::Auto, None, true));
    let d = parser.push("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\"");
    assert_eq!(d.content, "");
    assert_eq!(d.calls.len(), 1);
    assert_eq!(d.calls[0].name.as_deref(), Some("f"));
    assert_eq!(d.calls[0].arguments, "{\"a\"");
    let d = parser.push(": 1}}</tool_call>");
    assert_eq!(d.calls.len(), 1);
    assert_eq!(
        (d.calls[0].id.as_ref(), d.calls[0].name.as_ref()),
        (None, None)
    );
    assert_eq!(d.calls[0].arguments, ": 1}");
    assert_eq!(parser.calls_made(), 1);
}

#[test]
fn auto_never_forces_a_call_and_partial_markers_are_given_back() {
    let mut parser = ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Auto, None, true));
    let d = parser.push("plain <｜tool");
    assert_eq!((d.content.as_str(), d.calls.len()), ("plain ", 0));
    let d = parser.finish();
    assert_eq!((d.content.as_str(), d.calls.len()), ("<｜tool", 0));
    let mut parser = ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Auto, None, true));
    let (content, calls) = run(&mut parser, "{\"name\": \"f\", \"arguments\": {}}");
    assert!(calls.is_empty(), "a bare JSON object is content under auto");
    assert_eq!(content, "{\"name\": \"f\", \"arguments\": {}}");
}

#[test]
fn native_required_and_named_start_inside_a_call() {
    let mut parser =
        ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Required, None, true));
    let (content, calls) = run(
        &mut parser,
        "{\"name\": \"g\", \"arguments\": \"{\\\"x\\\": 1}\"}<｜tool▁call▁end｜>",
    );
    assert_eq!(content, "");
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("g", "{\"x\": 1}")
    );
    let mut parser = ToolCallParser::new(
        ToolFormat::Demo,
        &settings(ToolMode::Named, Some("f"), true),
    );
    let (content, calls) = run(&mut parser, "{\"x\": \"é\"}}");
    assert_eq!(content, "");
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("f", "{\"x\": \"é\"}")
    );
    // Text that is no call is never content under a forcing `tool_choice` (vLLM's rule).
    let mut parser = ToolCallParser::new(
        ToolFormat::Demo,
        &settings(ToolMode::Named, Some("f"), true),
    );
    assert_eq!(run(&mut parser, "oops"), (String::new(), Vec::new()));
    for text in ["nope", "{\"na"] {
        let mut parser =
            ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Required, None, true));
        assert_eq!(run(&mut parser, text), (String::new(), Vec::new()));
    }
}

#[test]
fn forced_json_for_the_other_formats() {
    let mut parser = ToolCallParser::new(
        ToolFormat::Granite,
        &settings(ToolMode::Named, Some("g"), true),
    );
    let (content, calls) = run(&mut parser, "{\"x\": [1]}");
    assert_eq!(content, "");
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("g", "{\"x\": [1]}")
    );
    let mut parser = ToolCallParser::new(
        ToolFormat::Pythonic,
        &settings(ToolMode::Required, None, true),
    );
    let (content, calls) = run(
        &mut parser,
        "[{\"name\": \"f\", \"parameters\": {}}, {\"name\": \"g\", \"parameters\": {\"y\": 2}}]",
    );
    assert_eq!(content, "");
    let got: Vec<_> = calls
        .iter()
        .map(|c| (c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(got, [("f", "{}"), ("g", "{\"y\": 2}")]);
}

#[test]
fn parallel_false_keeps_the_first_call() {
    let call = "<｜tool▁call▁begin｜>{\"name\": \"f\", \"arguments\": {}}<｜tool▁call▁end｜>";
    let mut parser = ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Auto, None, false));
    let (content, calls) = run(&mut parser, &format!("{call}{call}"));
    assert_eq!((content.as_str(), calls.len()), ("", 1));
    let mut parser = ToolCallParser::new(ToolFormat::Demo, &settings(ToolMode::Auto, None, true));
    assert_eq!(run(&mut parser, &format!("{call}{call}")).1.len(), 2);
}

#[test]
fn mistral_ids_are_nine_letters_or_digits() {
    let id = parser::new_call_id(true);
    assert_eq!(id.len(), 9);
    assert!(id.chars().all(|c| c.is_ascii_alphanumeric()));
}

#[test]
fn whole_call_bodies() {
    use json_call::parse_whole;
    assert_eq!(
        parse_whole(" {\"arguments\":{} ,\"name\":\"x\" } "),
        Some(("x".into(), "{}".into()))
    );
    assert_eq!(parse_whole("{\"name\": \"f\", \"arguments\": NaN}"), None);
    assert_eq!(parse_whole("{\"name\": \"f\", \"arguments\": 1}"), None);
    assert_eq!(parse_whole("{\"name\": 1, \"arguments\": {}}"), None);
    assert_eq!(parse_whole("{\"name\": \"f\"}"), None);
    assert_eq!(
        parse_whole("{\"parameters\": {\"a\": \"}\"}, \"name\": \"f\"}"),
        Some(("f".into(), "{\"a\": \"}\"}".into()))
    );
}

#[test]
fn settings_checks_name_the_field() {
    let tools = json!([{"type": "function", "function": {"name": "f"}}]);
    let ok = tool_settings(Some(&tools), None, None, Some("demo")).unwrap();
    assert_eq!(ok.mode, ToolMode::Auto);
    assert!(ok.parallel);
    let none = tool_settings(None, None, None, None).unwrap();
    assert_eq!(none.mode, ToolMode::None);
    let named = json!({"type": "function", "function": {"name": "f"}});
    let s = tool_settings(Some(&tools), Some(&named), Some(false), Some("demo")).unwrap();
    assert_eq!(
        (s.mode, s.name.as_deref(), s.parallel),
        (ToolMode::Named, Some("f"), false)
    );
    let cases = [
        (
            json!("x"),
            Some(tools.clone()),
            Some("demo"),
            "tool_choice",
            "must be",
        ),
        (
            json!("required"),
            None,
            Some("demo"),
            "tool_choice",
            "needs `tools`",
        ),
        (
            json!({"type": "function", "function": {"name": "g"}}),
            Some(tools.clone()),
            Some("demo"),
            "tool_choice",
            "not in `tools`",
        ),
        (
            json!("auto"),
            Some(tools.clone()),
            None,
            "tool_choice",
            "--tool-call-parser",
        ),
        (
            json!("none"),
            Some(json!({})),
            None,
            "tools",
            "expected a list",
        ),
        (json!("none"), Some(json!([1])), None, "tools[0]", "`type`"),
        (
            json!("none"),
            Some(json!([{"type": "function"}])),
            None,
            "tools[0].function",
            "name",
        ),
    ];
    for (choice, tools, parser, param, words) in cases {
        let err = tool_settings(tools.as_ref(), Some(&choice), None, parser).unwrap_err();
        let body: Value = serde_json::from_slice(&err.to_json()).unwrap();
        assert_eq!(body["error"]["param"], param, "{choice}");
        assert!(err.to_string().contains(words), "{err}");
    }
    assert!(tool_settings(None, Some(&json!("none")), None, None).is_ok());
}

#[test]
fn named_prefill() {
    for name in PARSER_NAMES.iter() {
        assert_eq!(
            ToolFormat::from_name(name).map(ToolFormat::name),
            Some(*name)
        );
    }
    let s = settings(ToolMode::Named, Some("a\"b"), true);
    assert_eq!(
        prefill(ToolFormat::Demo, &s).unwrap(),
        "<｜tool▁call▁begin｜>{\"name\": \"a\\\"b\", \"arguments\": "
    );
    assert_eq!(
        prefill(ToolFormat::Mistral, &s),
        None,
        "forced JSON: no prefill"
    );
}
