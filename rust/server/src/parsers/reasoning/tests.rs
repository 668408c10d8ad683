//! The shared case table `tests/parser_cases/reasoning.jsonl`, pushed whole, one
//! character at a time and split at every point (as `tests/server/test_reasoning_cases.py`).

use serde::Deserialize;

use super::*;

const CASES: &str = include_str!("../../../../../tests/parser_cases/reasoning.jsonl");

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    parser: String,
    prompt_inside: bool,
    text: String,
    reasoning: String,
    content: String,
}

/// (reasoning, content) of `pieces`, and every piece emitted on the way.
fn run(markers: ReasoningMarkers, inside: bool, pieces: &[&str]) -> (String, String, Vec<String>) {
    let mut parser = ReasoningParser::new(markers, inside);
    let (mut reasoning, mut content, mut emitted) = (String::new(), String::new(), Vec::new());
    let mut take = |(r, c): (String, String)| {
        reasoning.push_str(&r);
        content.push_str(&c);
        emitted.push(r);
        emitted.push(c);
    };
    for piece in pieces {
        take(parser.push(piece));
    }
    take(parser.finish());
    (reasoning, content, emitted)
}

fn cases() -> Vec<Case> {
    CASES
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("a case of reasoning.jsonl"))
        .collect()
}

#[test]
fn the_case_table_in_three_push_modes() {
    let cases = cases();
    assert!(cases.len() >= 10);
    for case in cases {
        let markers = markers_of(&case.parser).expect("a known parser");
        let text = case.text.as_str();
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let mut modes: Vec<Vec<&str>> =
            vec![vec![text], chars.iter().map(String::as_str).collect()];
        modes.extend(
            text.char_indices()
                .map(|(k, _)| vec![&text[..k], &text[k..]]),
        );
        for pieces in modes {
            let (reasoning, content, emitted) = run(markers, case.prompt_inside, &pieces);
            assert_eq!(
                (reasoning.as_str(), content.as_str()),
                (case.reasoning.as_str(), case.content.as_str()),
                "{} with pieces {pieces:?}",
                case.name
            );
            for piece in emitted {
                assert!(
                    case.reasoning.contains(&piece) || case.content.contains(&piece),
                    "{}: {piece:?} is neither reasoning nor content",
                    case.name
                );
            }
        }
    }
}

#[test]
fn prompt_state() {
    let think = markers_of("qwen3").expect("qwen3");
    assert!(starts_inside(think, "<｜Assistant｜><think>"));
    assert!(!starts_inside(think, "<｜Assistant｜></think>"));
    assert!(!starts_inside(think, "<think>x</think> plain"));
    assert!(!starts_inside(think, "plain"));
    let granite = markers_of("granite").expect("granite");
    assert!(starts_inside(granite, "sys\nHere's my thought process:"));
    assert!(!starts_inside(
        granite,
        "write Here is my thought process: then Here is my response:"
    ));
    assert!(markers_of("openai").is_none());
}

/// The names and markers are `server/contracts/reasoning_formats.json`'s, read here as plain
/// JSON, and each start / end marker pair splits a sample built from them (the Python twin:
/// `test_the_reasoning_formats_are_the_files` in `tests/server/test_contracts.py`).
#[test]
fn the_reasoning_formats_are_the_files() {
    let file: serde_json::Value = serde_json::from_str(FILE).expect("JSON");
    let specs = file["formats"].as_array().cloned().unwrap_or_default();
    let strs = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let names: Vec<&str> = specs.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(parser_names().collect::<Vec<_>>(), names);
    for spec in &specs {
        let name = spec["name"].as_str().unwrap_or_default();
        let markers = markers_of(name).expect("a parser per name");
        let (start, end) = (strs(&spec["start"]), strs(&spec["end"]));
        assert_eq!(
            markers.start,
            start.iter().map(String::as_str).collect::<Vec<_>>()
        );
        assert_eq!(
            markers.end,
            end.iter().map(String::as_str).collect::<Vec<_>>()
        );
        for s in &start {
            for e in &end {
                let text = format!("a{s}r{e}c");
                let chars: Vec<String> = text.chars().map(String::from).collect();
                let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
                let (reasoning, content, _) = run(markers, false, &pieces);
                assert_eq!(
                    (reasoning.as_str(), content.as_str()),
                    ("r", "ac"),
                    "{text}"
                );
            }
        }
    }
}
