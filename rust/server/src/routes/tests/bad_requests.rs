//! The shared bad-request table `tests/request_cases/bad_requests.json` (the Python
//! server tests and the e2e suite run the same file; its README says the format): every
//! case through the router gets its status, error type, code, param and message words,
//! and a good request after it is still answered. The harness serves what the table's
//! `settings` name (the e2e servers' model name, context length, vocabulary size, batch
//! limit, the demo model's chat template and the parsers vrs-rs picks for it); only the
//! tokenizer is the tiny one.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::*;
use crate::parsers::select::choose;
use crate::state::HttpOptions;
use crate::testutil::Served;

const TABLE: &str = include_str!("../../../../../tests/request_cases/bad_requests.json");
/// The chat template the table's `settings.chat_template` names, compiled in.
const TEMPLATE_PATH: &str = "engine/mock/templates/demo_chat_template.jinja";
const TEMPLATE: &str =
    include_str!("../../../../../engine/mock/templates/demo_chat_template.jinja");

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    settings: Settings,
    error_types: BTreeMap<u16, String>,
    /// The error types of the routes that answer in Anthropic's shape (`/v1/messages*`).
    anthropic_error_types: BTreeMap<u16, String>,
    cases: Vec<Case>,
}

/// The routes whose errors are in Anthropic's shape.
const ANTHROPIC_PATHS: &str = "/v1/messages";

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    model: String,
    max_model_len: u64,
    vocab_size: u64,
    max_batch_prompts: usize,
    chat_template: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    id: String,
    path: String,
    body: Option<Value>,
    raw: Option<String>,
    status: u16,
    param: Option<String>,
    words: String,
}

impl Case {
    /// The bytes sent: `raw` as it is, else `body` with its `$repeat` lists expanded.
    fn content(&self) -> String {
        match (&self.body, &self.raw) {
            (Some(body), None) => expand(body.clone()).to_string(),
            (None, Some(raw)) => raw.clone(),
            _ => panic!("case {}: give exactly one of `body` and `raw`", self.id),
        }
    }
}

/// `{"$repeat": item, "times": n}` anywhere in `value` becomes a list of `n` items.
fn expand(value: Value) -> Value {
    match value {
        Value::Object(map) if map.contains_key("$repeat") => {
            assert_eq!(
                map.len(),
                2,
                "a $repeat object has `times` and nothing else"
            );
            let times = map["times"].as_u64().expect("`times` is a count") as usize;
            Value::Array(vec![expand(map["$repeat"].clone()); times])
        }
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, expand(v))).collect()),
        Value::Array(items) => Value::Array(items.into_iter().map(expand).collect()),
        other => other,
    }
}

/// What is wrong with the answer to `case` on a `/v1/messages` route (empty: nothing):
/// `{"type": "error", "error": {"type", "message"}}`, the message starting `param: ` when
/// the error names a field.
fn anthropic_mismatches(table: &Table, case: &Case, v: &Value) -> Vec<String> {
    let mut wrong = Vec::new();
    let keys = |v: &Value| -> Vec<String> {
        let mut keys: Vec<String> = v
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        keys.sort_unstable();
        keys
    };
    if keys(v) != ["error", "type"] || v["type"] != "error" {
        wrong.push(format!("body keys {:?}", keys(v)));
    }
    let error = &v["error"];
    if keys(error) != ["message", "type"] {
        wrong.push(format!("error keys {:?}", keys(error)));
    }
    let expected_type = table
        .anthropic_error_types
        .get(&case.status)
        .map(String::as_str);
    if error["type"].as_str() != expected_type {
        wrong.push(format!(
            "type {}, expected {expected_type:?}",
            error["type"]
        ));
    }
    let message = error["message"].as_str().unwrap_or_default();
    if let Some(param) = &case.param {
        if !message.starts_with(&format!("{param}: ")) {
            wrong.push(format!("message {message:?} does not start with {param:?}"));
        }
    }
    if !message.contains(&case.words) {
        wrong.push(format!("message {message:?} lacks {:?}", case.words));
    }
    wrong
}

/// What is wrong with the answer to `case` (empty: nothing).
fn mismatches(
    table: &Table,
    case: &Case,
    status: StatusCode,
    content_type: &str,
    v: &Value,
) -> Vec<String> {
    let mut wrong = Vec::new();
    if status.as_u16() != case.status {
        wrong.push(format!("status {status}, expected {}", case.status));
    }
    if content_type != "application/json" {
        wrong.push(format!("content type {content_type:?}"));
    }
    if case.path.starts_with(ANTHROPIC_PATHS) {
        wrong.extend(anthropic_mismatches(table, case, v));
        return wrong;
    }
    let error = &v["error"];
    let keys: Vec<&str> = error
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    if sorted != ["code", "message", "param", "type"] {
        wrong.push(format!("error keys {keys:?}"));
    }
    let expected_type = table.error_types.get(&case.status).map(String::as_str);
    if error["type"].as_str() != expected_type {
        wrong.push(format!(
            "type {}, expected {expected_type:?}",
            error["type"]
        ));
    }
    if error["code"].as_u64() != Some(u64::from(case.status)) {
        wrong.push(format!("code {}, expected {}", error["code"], case.status));
    }
    let param = case.param.as_ref().map_or(Value::Null, |p| json!(p));
    if error["param"] != param {
        wrong.push(format!(
            "param {}, expected {:?}",
            error["param"], case.param
        ));
    }
    let message = error["message"].as_str().unwrap_or_default();
    if !message.contains(&case.words) {
        wrong.push(format!("message {message:?} lacks {:?}", case.words));
    }
    wrong
}

#[tokio::test]
async fn the_bad_request_table_gets_its_errors_and_the_server_goes_on() {
    let table: Table = serde_json::from_str(TABLE).expect("bad_requests.json parses");
    let settings = &table.settings;
    assert_eq!(
        settings.chat_template, TEMPLATE_PATH,
        "the template compiled in here"
    );
    assert!(!table.cases.is_empty());
    // The parsers vrs-rs picks at start-up for the demo template (`auto`, as the e2e
    // servers run): a case such as `tool_choice: "required"` needs a tool-call parser.
    let (tools, reasoning) = choose(None, None, Some(TEMPLATE), None).expect("auto parsers");
    let options = HttpOptions {
        max_batch_prompts: settings.max_batch_prompts,
        tool_call_parser: tools.name,
        reasoning_parser: reasoning.name,
        ..HttpOptions::default()
    };
    let served = Served {
        model_name: &settings.model,
        chat_template: TEMPLATE,
        max_model_len: settings.max_model_len,
        vocab_size: settings.vocab_size,
    };
    let h = Harness::serving(vec![5, 6], Duration::ZERO, options, &served);
    let good = json!({"model": settings.model, "prompt": "hi", "max_tokens": 2}).to_string();
    let mut failures = Vec::new();
    for case in &table.cases {
        let (status, content_type, bytes) = call(&h, "POST", &case.path, &case.content()).await;
        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let wrong = mismatches(&table, case, status, &content_type, &v);
        if !wrong.is_empty() {
            failures.push(format!("{}: {}\n  answer: {v}", case.id, wrong.join("; ")));
        }
        let (status, _, bytes) = call(&h, "POST", "/v1/completions", &good).await;
        let v = json_of(&bytes);
        if status != StatusCode::OK || v["usage"]["completion_tokens"] != 2 {
            failures.push(format!(
                "{}: the good request after it got {status}: {v}",
                case.id
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n{}",
        failures.len(),
        table.cases.len(),
        failures.join("\n")
    );
}
