use serde_json::{json, Value};

use super::*;

const DEMO: ToolFormat = ToolFormat::Demo;
const HERMES: ToolFormat = ToolFormat::Hermes;

fn weather() -> Value {
    json!({"type": "function", "function": {"name": "get_weather", "description": "d",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}})
}

/// No `parameters`, and `parameters` that are not an object: both take the empty object.
fn bare(name: &str, parameters: Option<Value>) -> Value {
    let mut function = json!({"name": name});
    if let Some(p) = parameters {
        function["parameters"] = p;
    }
    json!({"type": "function", "function": function})
}

fn settings(tools: Vec<Value>, mode: ToolMode, name: Option<&str>, parallel: bool) -> ToolSettings {
    ToolSettings {
        tools: Some(tools),
        mode,
        name: name.map(str::to_owned),
        parallel,
    }
}

const WEATHER_ARGS: &str = r#"{"type":"json_schema","json_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"max_whitespace_cnt":1}"#;
const EMPTY_ARGS: &str = r#"{"type":"json_schema","json_schema":{"type":"object","properties":{}},"max_whitespace_cnt":1}"#;

#[test]
fn named_function_demo() {
    let s = settings(
        vec![bare("x", None), weather()],
        ToolMode::Named,
        Some("get_weather"),
        true,
    );
    let expected = format!(
        r#"{{"type":"structural_tag","format":{{"type":"sequence","elements":[{WEATHER_ARGS},{{"type":"const_string","value":"}}<｜tool▁call▁end｜>"}}]}}}}"#
    );
    assert_eq!(forced_tag(DEMO, &s).unwrap(), expected);
}

#[test]
fn named_function_without_parameters_hermes() {
    for parameters in [None, Some(json!(null)), Some(json!("object"))] {
        let s = settings(
            vec![bare("f", parameters)],
            ToolMode::Named,
            Some("f"),
            false,
        );
        let expected = format!(
            r#"{{"type":"structural_tag","format":{{"type":"sequence","elements":[{EMPTY_ARGS},{{"type":"const_string","value":"}}</tool_call>"}}]}}}}"#
        );
        assert_eq!(forced_tag(HERMES, &s).unwrap(), expected);
    }
}

fn call(name: &str, args: &str, end: &str) -> String {
    format!(
        r#"{{"type":"sequence","elements":[{{"type":"const_string","value":"{{\"name\": \"{name}\", \"arguments\": "}},{args},{{"type":"const_string","value":"}}{end}"}}]}}"#
    )
}

#[test]
fn required_one_tool_is_its_call_without_or() {
    let s = settings(vec![weather()], ToolMode::Required, None, false);
    let expected = format!(
        r#"{{"type":"structural_tag","format":{}}}"#,
        call("get_weather", WEATHER_ARGS, "</tool_call>")
    );
    assert_eq!(forced_tag(HERMES, &s).unwrap(), expected);
}

#[test]
fn required_parallel_demo_repeats_after_the_begin_marker() {
    let s = settings(
        vec![weather(), bare("ping", None)],
        ToolMode::Required,
        None,
        true,
    );
    let end = "<｜tool▁call▁end｜>";
    let any = format!(
        r#"{{"type":"or","elements":[{},{}]}}"#,
        call("get_weather", WEATHER_ARGS, end),
        call("ping", EMPTY_ARGS, end)
    );
    let expected = format!(
        r#"{{"type":"structural_tag","format":{{"type":"sequence","elements":[{any},{{"type":"star","content":{{"type":"sequence","elements":[{{"type":"const_string","value":"<｜tool▁call▁begin｜>"}},{any}]}}}}]}}}}"#
    );
    assert_eq!(forced_tag(DEMO, &s).unwrap(), expected);
}

#[test]
fn required_not_parallel_hermes_is_one_call_of_any_tool() {
    let s = settings(
        vec![weather(), bare("ping", None)],
        ToolMode::Required,
        None,
        false,
    );
    let expected = format!(
        r#"{{"type":"structural_tag","format":{{"type":"or","elements":[{},{}]}}}}"#,
        call("get_weather", WEATHER_ARGS, "</tool_call>"),
        call("ping", EMPTY_ARGS, "</tool_call>")
    );
    assert_eq!(forced_tag(HERMES, &s).unwrap(), expected);
}

#[test]
fn names_are_json_strings_as_in_the_prefill() {
    let s = settings(vec![bare("a\"b/日", None)], ToolMode::Required, None, false);
    let tag: Value = serde_json::from_str(&forced_tag(HERMES, &s).unwrap()).unwrap();
    let prefix = &tag["format"]["elements"][0]["value"];
    assert_eq!(prefix.as_str().unwrap(), call_prefix("a\"b/日"));
    assert_eq!(prefix, "{\"name\": \"a\\\"b/日\", \"arguments\": ");
}

#[test]
fn auto_and_none_constrain_nothing() {
    for mode in [ToolMode::Auto, ToolMode::None] {
        assert_eq!(
            forced_tag(DEMO, &settings(vec![weather()], mode, None, true)),
            None
        );
    }
}

#[test]
fn other_formats_force_plain_json() {
    let named = settings(vec![weather()], ToolMode::Named, Some("get_weather"), true);
    for format in [
        ToolFormat::Mistral,
        ToolFormat::Qwen3Coder,
        ToolFormat::Pythonic,
    ] {
        assert_eq!(
            forced_tag(format, &named).unwrap(),
            format!(r#"{{"type":"structural_tag","format":{WEATHER_ARGS}}}"#)
        );
    }
    let call = |name: &str, args: &str| {
        format!(
            r#"{{"type":"sequence","elements":[{{"type":"const_string","value":"{{\"name\": \"{name}\", \"parameters\": "}},{args},{{"type":"const_string","value":"}}"}}]}}"#
        )
    };
    let open = r#"{"type":"const_string","value":"["}"#;
    let close = r#"{"type":"const_string","value":"]"}"#;
    let one = settings(vec![weather()], ToolMode::Required, None, false);
    assert_eq!(
        forced_tag(ToolFormat::Granite, &one).unwrap(),
        format!(
            r#"{{"type":"structural_tag","format":{{"type":"sequence","elements":[{open},{},{close}]}}}}"#,
            call("get_weather", WEATHER_ARGS)
        )
    );
    let many = settings(
        vec![weather(), bare("x", None)],
        ToolMode::Required,
        None,
        true,
    );
    let tag: Value =
        serde_json::from_str(&forced_tag(ToolFormat::Llama3Json, &many).unwrap()).unwrap();
    let elements = &tag["format"]["elements"];
    assert_eq!(elements[1]["type"], "or");
    assert_eq!(elements[2]["type"], "star");
    assert_eq!(elements[2]["content"]["elements"][0]["value"], ", ");
    assert_eq!(elements[3]["value"], "]");
    let x: Value = serde_json::from_str(&call("x", EMPTY_ARGS)).unwrap();
    assert_eq!(elements[1]["elements"][1], x);
}
