use serde_json::json;

use super::*;

const DEMO: ToolFormat = TOOL_CALL_PARSERS[0].1;

fn settings(mode: ToolMode, name: Option<&str>, parallel: bool) -> ToolSettings {
    ToolSettings {
        tools: None,
        mode,
        name: name.map(str::to_owned),
        parallel,
    }
}

/// Feeds `text` one char at a time: markers split at every position.
fn run(parser: &mut ToolCallParser, text: &str) -> (String, Vec<ToolCall>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    for ch in text.chars() {
        let (c, mut k) = parser.push(&ch.to_string());
        content.push_str(&c);
        calls.append(&mut k);
    }
    let (c, mut k) = parser.finish();
    content.push_str(&c);
    calls.append(&mut k);
    (content, calls)
}

#[test]
fn auto_splits_content_and_calls_across_any_piece_boundary() {
    let text = "Hi <｜tool▁call▁begin｜>{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\
                <｜tool▁call▁end｜> bye <｜tool▁call▁begin｜>{bad}<｜tool▁call▁end｜>";
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Auto, None, true));
    let (content, calls) = run(&mut parser, text);
    assert_eq!(
        content,
        "Hi  bye <｜tool▁call▁begin｜>{bad}<｜tool▁call▁end｜>"
    );
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].name, "f");
    assert_eq!(calls[0].arguments, "{\"a\": [1, 2]}");
    assert!(calls[0].id.starts_with("call_") && calls[0].id.len() == 29);
    // The same text in one piece gives the same result.
    let mut whole = ToolCallParser::new(DEMO, &settings(ToolMode::Auto, None, true));
    let (mut content2, mut calls2) = whole.push(text);
    let (rest, mut more) = whole.finish();
    content2.push_str(&rest);
    calls2.append(&mut more);
    assert_eq!(content2, content);
    assert_eq!(calls2.len(), 1);
}

#[test]
fn auto_never_forces_a_call_and_partial_markers_are_given_back() {
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Auto, None, true));
    let (content, calls) = parser.push("plain <｜tool");
    assert_eq!((content.as_str(), calls.len()), ("plain ", 0));
    let (content, calls) = parser.finish();
    assert_eq!((content.as_str(), calls.len()), ("<｜tool", 0));
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Auto, None, true));
    let (content, calls) = run(&mut parser, "{\"name\": \"f\", \"arguments\": {}}");
    assert!(calls.is_empty(), "a bare JSON object is content under auto");
    assert_eq!(content, "{\"name\": \"f\", \"arguments\": {}}");
}

#[test]
fn required_and_named_start_inside_a_call() {
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Required, None, true));
    let (content, calls) = run(
        &mut parser,
        "{\"name\": \"g\", \"arguments\": \"{\\\"x\\\": 1}\"}<｜tool▁call▁end｜>",
    );
    assert_eq!(content, "");
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("g", "{\"x\": 1}")
    );
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Named, Some("f"), true));
    let (content, calls) = run(&mut parser, "{\"x\": \"é\"}}");
    assert_eq!(content, "");
    assert_eq!(
        (calls[0].name.as_str(), calls[0].arguments.as_str()),
        ("f", "{\"x\": \"é\"}")
    );
    // Unparseable: the generated text only (the prompt's part left out).
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Named, Some("f"), true));
    assert_eq!(run(&mut parser, "oops").0, "oops");
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Required, None, true));
    assert_eq!(run(&mut parser, "nope").0, "nope");
}

#[test]
fn parallel_false_keeps_the_first_call() {
    let call = "<｜tool▁call▁begin｜>{\"name\": \"f\", \"arguments\": {}}<｜tool▁call▁end｜>";
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Auto, None, false));
    let (_, calls) = run(&mut parser, &format!("{call}{call}"));
    assert_eq!(calls.len(), 1);
    let mut parser = ToolCallParser::new(DEMO, &settings(ToolMode::Auto, None, true));
    assert_eq!(run(&mut parser, &format!("{call}{call}")).1.len(), 2);
}

#[test]
fn call_bodies() {
    assert_eq!(
        parse_call(" {\"arguments\":{} ,\"name\":\"x\" } "),
        Some(("x".into(), "{}".into()))
    );
    assert_eq!(parse_call("{\"name\": \"f\", \"arguments\": NaN}"), None);
    assert_eq!(
        parse_call("{\"name\": \"f\", \"name\": \"g\", \"arguments\": 1}"),
        None
    );
    assert_eq!(
        parse_call("[\"f\", {}]"),
        None,
        "a struct as an array is not a call"
    );
    assert_eq!(parse_call("{\"name\": 1, \"arguments\": {}}"), None);
    assert_eq!(parse_call("{\"name\": \"f\"}"), None);
    assert_eq!(parse_call("{\"name\": \"f\", \"arguments\": {}} x"), None);
    assert_eq!(
        parse_call("{\"name\": \"f\", \"arguments\": [1,  2], \"x\": 1, \"x\": 2}"),
        Some(("f".into(), "[1,  2]".into()))
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
    assert_eq!(
        prefill(DEMO, &settings(ToolMode::Named, Some("a\"b"), true)).unwrap(),
        "<｜tool▁call▁begin｜>{\"name\": \"a\\\"b\", \"arguments\": "
    );
}
