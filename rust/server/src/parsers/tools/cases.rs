//! The shared case table `tests/parser_cases/tools.jsonl` (the Python suite reads the
//! same file): every case pushed whole, one character at a time, and split in two at
//! every point must give its content, calls and finish reason, leak no held text, and
//! stream each call as a first delta with id and name, then argument pieces only.

use serde::Deserialize;
use serde_json::Value;

use super::*;

const TABLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/parser_cases/tools.jsonl"
));

#[derive(Deserialize)]
struct Case {
    name: String,
    parser: String,
    tools: Value,
    tool_choice: Value,
    parallel: bool,
    text: String,
    content: String,
    calls: Vec<Expected>,
    finish: String,
    #[serde(default = "stop")]
    engine_finish: String,
}

#[derive(Deserialize, Debug, PartialEq)]
struct Expected {
    name: String,
    arguments: String,
}

fn stop() -> String {
    "stop".into()
}

/// One run over `pieces`: (content pieces, call deltas, finish).
fn run(case: &Case, pieces: &[&str]) -> (Vec<String>, Vec<CallDelta>, String) {
    let settings = tool_settings(
        Some(&case.tools),
        Some(&case.tool_choice),
        Some(case.parallel),
        Some(&case.parser),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let format = ToolFormat::from_name(&case.parser).unwrap_or_else(|| panic!("{}", case.parser));
    let mut parser = ToolCallParser::new(format, &settings);
    let mut content = Vec::new();
    let mut calls = Vec::new();
    let mut deltas: Vec<ToolDelta> = pieces.iter().map(|p| parser.push(p)).collect();
    deltas.push(parser.finish());
    for d in deltas {
        content.push(d.content);
        calls.extend(d.calls);
    }
    let finish = if case.engine_finish == "stop" && parser.calls_made() > 0 {
        "tool_calls".to_owned()
    } else {
        case.engine_finish.clone()
    };
    (content, calls, finish)
}

fn check(case: &Case, pieces: &[&str], how: &str) {
    let (content, deltas, finish) = run(case, pieces);
    let what = format!("{} ({how})", case.name);
    assert_eq!(content.concat(), case.content, "{what}: content");
    for piece in &content {
        assert!(
            case.content.contains(piece.as_str()),
            "{what}: leaked {piece:?}"
        );
    }
    let mut calls = Vec::new();
    ToolCall::accumulate(&mut calls, &deltas);
    let got: Vec<Expected> = calls
        .iter()
        .map(|c| Expected {
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        })
        .collect();
    assert_eq!(got, case.calls, "{what}: calls");
    assert_eq!(finish, case.finish, "{what}: finish");
    let mut seen = 0;
    for d in &deltas {
        if d.index == seen {
            let id =
                d.id.as_deref()
                    .unwrap_or_else(|| panic!("{what}: first delta has no id"));
            assert!(d.name.is_some(), "{what}: first delta has no name");
            if case.parser == "mistral" {
                assert!(
                    id.len() == 9 && id.chars().all(|c| c.is_ascii_alphanumeric()),
                    "{id}"
                );
            } else {
                assert!(id.len() == 29 && id.starts_with("call_"), "{what}: id {id}");
            }
            seen += 1;
        } else {
            assert!(d.index < seen, "{what}: index {} out of order", d.index);
            assert!(
                d.id.is_none() && d.name.is_none(),
                "{what}: later delta with id/name"
            );
            assert!(!d.arguments.is_empty(), "{what}: empty piece");
        }
    }
}

#[test]
fn every_case_in_every_push_mode() {
    let cases: Vec<Case> = TABLE
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(cases.len() >= 60, "the table has {} cases", cases.len());
    for case in &cases {
        let text = case.text.as_str();
        check(case, &[text], "whole");
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        check(case, &pieces, "one char at a time");
        for (k, _) in text.char_indices().skip(1) {
            check(
                case,
                &[&text[..k], &text[k..]],
                &format!("split at byte {k}"),
            );
        }
    }
}
