//! A `POST /v1/responses` body → the equivalent chat completions request (a JSON object for
//! [`crate::validate::prompt::chat`]) and what the response object echoes. What only the
//! Responses API has is checked here; the chat path's errors are renamed to the Responses
//! fields ([`super::fields::responses_param`]). Mirrors `server/routes/responses/request.py`.
//! Behaviour: docs/api.md, "Responses API".

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::edge::error::ApiError;
use crate::openai::ints::{self, I64_RANGE};

use super::extras::{extras, own, EXTRAS, INCLUDABLE, MAX_TOP_LOGPROBS, OWN};
use super::fields::{bad, boolean, invalid, known_keys, list, object, string};
use super::input;

/// The request keys this API knows.
const KEYS: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_output_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "top_k",
    "text",
    "reasoning",
    "user",
    "metadata",
    "stream",
    "stream_options",
    "store",
    "previous_response_id",
    "background",
    "conversation",
    "prompt",
    "include",
    "truncation",
    "top_logprobs",
    "max_tool_calls",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
    "chat_template_kwargs",
];

/// Fields passed to the chat request under the same name.
const SAME: &[&str] = &[
    "temperature",
    "top_p",
    "stop",
    "seed",
    "top_k",
    "user",
    "parallel_tool_calls",
];

/// What the response object echoes of the request (defaults filled in).
#[derive(Debug, Clone, PartialEq)]
pub struct Echo {
    pub instructions: Value,
    pub max_output_tokens: Value,
    pub parallel_tool_calls: Value,
    pub reasoning: Value,
    pub temperature: Value,
    pub text: Value,
    pub tool_choice: Value,
    pub tools: Value,
    pub top_p: Value,
    pub user: Value,
    pub metadata: Value,
    pub top_logprobs: Value,
    /// vLLM's `request_id`: the response's id (`None`: `resp_<hex>`).
    pub request_id: Option<String>,
    /// `enable_response_messages`: the final object has the raw prompt and output.
    pub response_messages: bool,
}

/// A translated request: the chat request object and the echo.
#[derive(Debug)]
pub struct Translated {
    pub chat: Map<String, Value>,
    pub echo: Echo,
}

/// Translates the body.
pub fn translate(body: &[u8]) -> Result<Translated, ApiError> {
    translate_continuing(body, &HashSet::new())
}

/// [`translate`], where `known_calls` are the call ids a `previous_response_id` declared.
pub fn translate_continuing(
    body: &[u8],
    known_calls: &HashSet<String>,
) -> Result<Translated, ApiError> {
    let map = crate::validate::params::parse_object(body)?;
    refusals(&map)?;
    let given = |key: &str| map.get(key).filter(|v| !v.is_null());
    let mut chat = Map::new();
    if let Some(model) = map.get("model") {
        chat.insert("model".into(), model.clone());
    }
    let mut messages = Vec::new();
    if let Some(instructions) = given("instructions") {
        let text = string(Some(instructions), "instructions")?;
        messages.push(json!({"role": "system", "content": text}));
    }
    messages.extend(input::messages(given("input"), known_calls)?);
    chat.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = given("tools") {
        chat.insert("tools".into(), self::tools(tools)?);
    }
    if let Some(choice) = given("tool_choice") {
        chat.insert("tool_choice".into(), tool_choice(choice)?);
    }
    if let Some(limit) = given("max_output_tokens") {
        if ints::beyond_i64(limit) {
            let message = format!("invalid value for 'max_output_tokens': {I64_RANGE}");
            return Err(ApiError::bad("max_output_tokens", message));
        }
        if limit.as_u64().map_or(true, |n| n < 1) {
            return Err(invalid("max_output_tokens", "an integer >= 1"));
        }
        chat.insert("max_completion_tokens".into(), limit.clone());
    }
    for key in SAME {
        if let Some(value) = given(key) {
            chat.insert((*key).into(), value.clone());
        }
    }
    if let Some(parallel) = given("parallel_tool_calls") {
        boolean(parallel, "parallel_tool_calls")?;
    }
    if let Some(user) = given("user") {
        string(Some(user), "user")?;
    }
    let format = match given("text") {
        Some(text) => self::text(text, &mut chat)?,
        None => json!({"type": "text"}),
    };
    let reasoning = match given("reasoning") {
        Some(r) => self::reasoning(r, &mut chat)?,
        None => json!({"effort": null, "summary": null}),
    };
    if let Some(metadata) = given("metadata") {
        self::metadata(metadata)?;
    }
    if let Some(stream) = given("stream") {
        chat.insert("stream".into(), Value::Bool(boolean(stream, "stream")?));
    }
    if let Some(options) = given("stream_options") {
        stream_options(options)?;
    }
    extras(&map, &mut chat)?;
    let (request_id, response_messages) = own(&map, &mut chat)?;
    let echoed = |key: &str, default: Value| given(key).cloned().unwrap_or(default);
    let echo = Echo {
        instructions: echoed("instructions", Value::Null),
        max_output_tokens: echoed("max_output_tokens", Value::Null),
        parallel_tool_calls: echoed("parallel_tool_calls", Value::Bool(true)),
        reasoning,
        temperature: echoed("temperature", json!(1.0)),
        text: json!({ "format": format }),
        tool_choice: echoed("tool_choice", json!("auto")),
        tools: echoed("tools", json!([])),
        top_p: echoed("top_p", json!(1.0)),
        user: echoed("user", Value::Null),
        metadata: echoed("metadata", json!({})),
        top_logprobs: echoed("top_logprobs", json!(0)),
        request_id,
        response_messages,
    };
    Ok(Translated { chat, echo })
}

/// Unknown fields, then the stateful and unimplemented features that ask for something:
/// a 400 naming the field, never ignored.
fn refusals(map: &Map<String, Value>) -> Result<(), ApiError> {
    let known = |k: &str| KEYS.contains(&k) || EXTRAS.contains(&k) || OWN.contains(&k);
    if let Some(key) = map.keys().find(|k| !known(k)) {
        return Err(bad(key, format!("unknown field '{key}'")));
    }
    let given = |key: &str| map.get(key).filter(|v| !v.is_null());
    // The stateful fields' types (their meaning: super::store).
    if let Some(store) = given("store") {
        boolean(store, "store")?;
    }
    if let Some(previous) = given("previous_response_id") {
        string(Some(previous), "previous_response_id")?;
    }
    for key in ["conversation", "prompt"] {
        if given(key).is_some() {
            return Err(bad(key, format!("{key} is not supported")));
        }
    }
    if let Some(background) = given("background") {
        let store = map.get("store").map_or(true, |v| v.as_bool() == Some(true));
        if boolean(background, "background")? && !store {
            let message = "background can only be used when `store` is true";
            return Err(bad("background", message));
        }
    }
    if let Some(include) = given("include") {
        for (i, item) in list(Some(include), "include")?.iter().enumerate() {
            if !item.as_str().is_some_and(|s| INCLUDABLE.contains(&s)) {
                let expected = format!("one of {}", INCLUDABLE.join(", "));
                return Err(invalid(&format!("include[{i}]"), &expected));
            }
        }
    }
    if let Some(truncation) = given("truncation") {
        let truncation = string(Some(truncation), "truncation")?;
        if truncation != "disabled" {
            let message = format!("truncation '{truncation}' is not supported: only 'disabled'");
            return Err(bad("truncation", message));
        }
    }
    if let Some(top) = given("top_logprobs") {
        if top.as_u64().map_or(true, |n| n > MAX_TOP_LOGPROBS) {
            let expected = format!("an integer from 0 to {MAX_TOP_LOGPROBS}");
            return Err(invalid("top_logprobs", &expected));
        }
    }
    if given("max_tool_calls").is_some() {
        return Err(bad("max_tool_calls", "max_tool_calls is not supported"));
    }
    for key in ["service_tier", "prompt_cache_key", "safety_identifier"] {
        if let Some(value) = given(key) {
            string(Some(value), key)?;
        }
    }
    Ok(())
}

/// `tools`: function tools → chat function tools.
fn tools(value: &Value) -> Result<Value, ApiError> {
    let list = list(Some(value), "tools")?;
    let mut out = Vec::with_capacity(list.len());
    for (i, tool) in list.iter().enumerate() {
        let at = format!("tools[{i}]");
        let tool = object(Some(tool), &at)?;
        let kind = string(tool.get("type"), &format!("{at}.type"))?;
        if kind != "function" {
            return Err(bad(
                format!("{at}.type"),
                format!("built-in tool '{kind}' is not supported: only function tools"),
            ));
        }
        let mut function = Map::new();
        let name = string(tool.get("name"), &format!("{at}.name"))?;
        function.insert("name".into(), Value::String(name.to_owned()));
        for key in ["description", "parameters", "strict"] {
            if let Some(v) = tool.get(key).filter(|v| !v.is_null()) {
                function.insert(key.into(), v.clone());
            }
        }
        out.push(json!({"type": "function", "function": function}));
    }
    Ok(Value::Array(out))
}

/// `tool_choice` → chat's.
fn tool_choice(value: &Value) -> Result<Value, ApiError> {
    match value {
        Value::String(s) if matches!(s.as_str(), "auto" | "none" | "required") => Ok(value.clone()),
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            match o.get("name").and_then(Value::as_str) {
                Some(name) => Ok(json!({"type": "function", "function": {"name": name}})),
                None => Err(bad_choice()),
            }
        }
        _ => Err(bad_choice()),
    }
}

fn bad_choice() -> ApiError {
    invalid(
        "tool_choice",
        "'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}",
    )
}

/// `text`: the format → chat `response_format`; returns the echoed format.
fn text(value: &Value, chat: &mut Map<String, Value>) -> Result<Value, ApiError> {
    let text = object(Some(value), "text")?;
    known_keys(text, &["format", "verbosity"], "text")?;
    match text.get("verbosity") {
        None | Some(Value::Null) => {}
        Some(v) if v == "medium" => {}
        Some(_) => {
            return Err(bad(
                "text.verbosity",
                "text.verbosity is not supported: only 'medium'",
            ))
        }
    }
    let Some(format) = text.get("format").filter(|v| !v.is_null()) else {
        return Ok(json!({"type": "text"}));
    };
    let fields = object(Some(format), "text.format")?;
    match string(fields.get("type"), "text.format.type")? {
        "text" => {}
        "json_object" => {
            chat.insert("response_format".into(), json!({"type": "json_object"}));
        }
        "json_schema" => {
            let mut schema = Map::new();
            let name = string(fields.get("name"), "text.format.name")?;
            schema.insert("name".into(), Value::String(name.to_owned()));
            let body = object(fields.get("schema"), "text.format.schema")?;
            schema.insert("schema".into(), Value::Object(body.clone()));
            for key in ["description", "strict"] {
                if let Some(v) = fields.get(key).filter(|v| !v.is_null()) {
                    schema.insert(key.into(), v.clone());
                }
            }
            chat.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": schema}),
            );
        }
        other => {
            return Err(bad(
                "text.format.type",
                format!(
                    "text.format type '{other}' is not supported: expected text, json_object \
                     or json_schema"
                ),
            ))
        }
    }
    Ok(format.clone())
}

/// `reasoning`: the effort → chat's `reasoning_effort`; returns the echo.
fn reasoning(value: &Value, chat: &mut Map<String, Value>) -> Result<Value, ApiError> {
    let fields = object(Some(value), "reasoning")?;
    known_keys(fields, &["effort", "summary"], "reasoning")?;
    let summary = fields.get("summary").cloned().unwrap_or(Value::Null);
    let known = |s: &str| matches!(s, "auto" | "concise" | "detailed");
    if !summary.is_null() && !summary.as_str().is_some_and(known) {
        return Err(invalid(
            "reasoning.summary",
            "one of auto, concise, detailed",
        ));
    }
    let effort = fields.get("effort").cloned().unwrap_or(Value::Null);
    if !effort.is_null() {
        let level = string(Some(&effort), "reasoning.effort")?;
        chat.insert("reasoning_effort".into(), Value::String(level.to_owned()));
    }
    Ok(json!({"effort": effort, "summary": summary}))
}

/// `metadata`: at most 16 string values.
fn metadata(value: &Value) -> Result<(), ApiError> {
    let fields = object(Some(value), "metadata")?;
    if fields.len() > 16 {
        return Err(bad("metadata", "metadata has more than 16 keys"));
    }
    for (key, v) in fields {
        string(Some(v), &format!("metadata.{key}"))?;
    }
    Ok(())
}

/// `stream_options`: only `include_obfuscation` (it pads events; ignored).
fn stream_options(value: &Value) -> Result<(), ApiError> {
    for (key, value) in object(Some(value), "stream_options")? {
        if key != "include_obfuscation" {
            let path = format!("stream_options.{key}");
            return Err(bad(&path, format!("unknown field '{path}'")));
        }
        boolean(value, "stream_options.include_obfuscation")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
