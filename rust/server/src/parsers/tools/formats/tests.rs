//! The formats and markers the parsers use are `server/contracts/tool_formats.json`'s
//! (the Python twin: `tests/server/test_contracts.py`), read here as plain JSON.

use serde_json::{json, Value};

use super::*;
use crate::parsers::tools::{ToolCall, ToolCallParser, ToolMode, ToolSettings};

fn file() -> Vec<Value> {
    let file: Value = serde_json::from_str(FILE).expect("tool_formats.json is JSON");
    file["formats"].as_array().cloned().unwrap_or_default()
}

fn field<'a>(spec: &'a Value, key: &str) -> &'a str {
    spec[key].as_str().unwrap_or_default()
}

#[test]
fn the_compiled_in_file_parses_and_names_every_format() {
    assert_eq!(CONTRACT.formats.len(), ALL.len());
    for (i, format) in ALL.iter().enumerate() {
        assert_eq!(*format as usize, i);
        assert_eq!(format.markers().name, format.name());
    }
}

#[test]
fn names_and_markers_are_the_files() {
    let specs = file();
    let names: Vec<&str> = specs.iter().map(|s| field(s, "name")).collect();
    assert_eq!(*PARSER_NAMES, names);
    for spec in &specs {
        let name = field(spec, "name");
        let format = format_of(name).expect("a ToolFormat per name");
        let m = format.markers();
        let got = [
            &m.begin,
            &m.end,
            &m.args,
            &m.call_begin,
            &m.call_end,
            &m.call_type,
            &m.sep,
            &m.args_begin,
            &m.args_end,
            &m.call_sep,
            &m.function,
            &m.function_end,
            &m.parameter,
            &m.parameter_end,
        ];
        let keys = [
            "begin",
            "end",
            "args",
            "call_begin",
            "call_end",
            "call_type",
            "sep",
            "args_begin",
            "args_end",
            "call_sep",
            "function",
            "function_end",
            "parameter",
            "parameter_end",
        ];
        for (got, key) in got.into_iter().zip(keys) {
            assert_eq!(got, field(spec, key), "{name} {key}");
        }
        let native = spec["native"].as_bool().unwrap_or(false);
        let want = native.then(|| (field(spec, "begin"), field(spec, "end")));
        assert_eq!(format.native(), want, "{name}");
        if !matches!(format, ToolFormat::Llama3Json | ToolFormat::Pythonic) {
            assert_eq!(format.begin(), Some(field(spec, "begin")), "{name}");
        }
    }
}

const BODY: &str = "{\"name\": \"f\", \"arguments\": {\"a\": 1}}";

/// Output with two calls of `f(a=1)` in the format `s`, built from the file's markers (plain
/// JSON) and the format's grammar, as `two_calls` in `tests/server/test_contracts.py`: a
/// marker typed differently in a parser fails to parse it.
fn two_calls(s: &Value) -> String {
    let m = |key: &str| field(s, key);
    match m("name") {
        "demo" | "hermes" => format!("{}{BODY}{}", m("begin"), m("end")).repeat(2),
        "llama3_json" => format!("{}{BODY}{} {BODY}", m("begin"), m("call_sep")),
        "mistral" => format!("{}f{}{{\"a\": 1}}", m("begin"), m("args")).repeat(2),
        "deepseek_v3" => {
            let call = format!(
                "{}{}{}f\n{}\n{{\"a\": 1}}\n{}{}",
                m("call_begin"),
                m("call_type"),
                m("sep"),
                m("args_begin"),
                m("args_end"),
                m("call_end")
            );
            format!("{}{}{}", m("begin"), call.repeat(2), m("end"))
        }
        "qwen3_coder" => format!(
            "{}\n{}f>\n{}a>\n1\n{}\n{}\n{}",
            m("begin"),
            m("function"),
            m("parameter"),
            m("parameter_end"),
            m("function_end"),
            m("end")
        )
        .repeat(2),
        "pythonic" => format!("{}[f(a=1), f(a=1)]{}", m("begin"), m("end")),
        "granite" => format!("{}[{BODY}, {BODY}]", m("begin")),
        other => panic!("no sample for the format {other}: add one"),
    }
}

#[test]
fn a_sample_built_from_the_files_markers_parses() {
    let settings = ToolSettings {
        tools: Some(vec![json!({"type": "function", "function": {"name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}})]),
        mode: ToolMode::Auto,
        name: None,
        parallel: true,
    };
    for spec in file() {
        let text = two_calls(&spec);
        let format = format_of(field(&spec, "name")).expect("a ToolFormat per name");
        let chars: Vec<String> = text.chars().map(String::from).collect();
        for pieces in [vec![text.clone()], chars] {
            let mut parser = ToolCallParser::new(format, &settings);
            let mut deltas: Vec<_> = pieces.iter().map(|p| parser.push(p)).collect();
            deltas.push(parser.finish());
            let mut calls = Vec::new();
            let mut content = String::new();
            for delta in &deltas {
                content.push_str(&delta.content);
                ToolCall::accumulate(&mut calls, &delta.calls);
            }
            assert_eq!(content, "", "{text}");
            let got: Vec<(&str, Value)> = calls
                .iter()
                .map(|c| {
                    let args = serde_json::from_str(&c.arguments).unwrap_or(Value::Null);
                    (c.name.as_str(), args)
                })
                .collect();
            assert_eq!(got, vec![("f", json!({"a": 1})); 2], "{text}");
        }
    }
}
