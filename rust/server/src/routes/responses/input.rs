//! A Responses `input` → chat messages. Mirrors `messages` in
//! `server/routes/responses/request.py`. Behaviour: docs/api.md, "Responses API".

use std::collections::HashSet;

use serde_json::{json, Map, Value};

use crate::edge::error::ApiError;

use super::fields::{bad, list, object, string};

/// Chat messages of the `input` field (`None`: absent); `known_calls`: the call ids a
/// `previous_response_id` declared.
pub fn messages(
    input: Option<&Value>,
    known_calls: &HashSet<String>,
) -> Result<Vec<Value>, ApiError> {
    let items = match input {
        Some(Value::String(text)) => return Ok(vec![json!({"role": "user", "content": text})]),
        None => return Err(bad("input", "'input' is required")),
        Some(other) => list(Some(other), "input")?,
    };
    let mut out: Vec<Value> = Vec::with_capacity(items.len());
    let mut declared = known_calls.clone();
    // Waiting for the next assistant message.
    let mut reasoning: Option<String> = None;
    // The last chat message is an assistant one that function calls join.
    let mut open_calls = false;
    for (i, item) in items.iter().enumerate() {
        let at = format!("input[{i}]");
        let item = object(Some(item), &at)?;
        let kind = match item.get("type") {
            None => "message",
            some => string(some, &format!("{at}.type"))?,
        };
        let mut joins = false;
        match kind {
            "message" => {
                let role = string(item.get("role"), &format!("{at}.role"))?;
                let role = match role {
                    "user" | "system" | "assistant" => role,
                    "developer" => "system",
                    _ => {
                        let path = format!("{at}.role");
                        let message = format!(
                            "invalid value for '{path}': expected one of user, system, \
                             developer, assistant"
                        );
                        return Err(bad(path, message));
                    }
                };
                let path = format!("{at}.content");
                let mut message = Map::new();
                message.insert("role".into(), json!(role));
                message.insert("content".into(), parts(item.get("content"), &path)?);
                if role == "assistant" {
                    if let Some(text) = reasoning.take() {
                        message.insert("reasoning_content".into(), Value::String(text));
                    }
                    joins = true;
                }
                out.push(Value::Object(message));
            }
            "function_call" => {
                let field = |key: &str| string(item.get(key), &format!("{at}.{key}"));
                let call_id = field("call_id")?;
                let call = json!({"id": call_id, "type": "function",
                                  "function": {"name": field("name")?,
                                               "arguments": field("arguments")?}});
                declared.insert(call_id.to_owned());
                match out.last_mut().and_then(Value::as_object_mut) {
                    Some(last) if open_calls => {
                        let calls = last.entry("tool_calls").or_insert_with(|| json!([]));
                        if let Value::Array(calls) = calls {
                            calls.push(call);
                        }
                    }
                    _ => {
                        let mut message = Map::new();
                        message.insert("role".into(), json!("assistant"));
                        message.insert("tool_calls".into(), json!([call]));
                        if let Some(text) = reasoning.take() {
                            message.insert("reasoning_content".into(), Value::String(text));
                        }
                        out.push(Value::Object(message));
                    }
                }
                joins = true;
            }
            "function_call_output" => {
                let path = format!("{at}.call_id");
                let call_id = string(item.get("call_id"), &path)?;
                if !declared.contains(call_id) {
                    let message = format!("function_call_output for unknown call_id '{call_id}'");
                    return Err(bad(path, message));
                }
                let path = format!("{at}.output");
                let output = match item.get("output") {
                    Some(Value::String(text)) => text.clone(),
                    other => texts(other, &path, &["input_text", "output_text"])?.concat(),
                };
                out.push(json!({"role": "tool", "tool_call_id": call_id, "content": output}));
            }
            "reasoning" => {
                let path = format!("{at}.content");
                let content = item.get("content").filter(|v| !v.is_null());
                let text = match content {
                    None => String::new(),
                    some => texts(some, &path, &["reasoning_text"])?.concat(),
                };
                if let Some(summary) = item.get("summary").filter(|v| !v.is_null()) {
                    list(Some(summary), &format!("{at}.summary"))?;
                }
                reasoning.get_or_insert_with(String::new).push_str(&text);
            }
            other => {
                let message = format!("input item type '{other}' is not supported");
                return Err(bad(format!("{at}.type"), message));
            }
        }
        open_calls = joins;
    }
    if let Some(text) = reasoning {
        out.push(json!({"role": "assistant", "content": "", "reasoning_content": text}));
    }
    Ok(out)
}

/// A message's content: a string, or text parts → chat text parts.
fn parts(value: Option<&Value>, at: &str) -> Result<Value, ApiError> {
    if let Some(text @ Value::String(_)) = value {
        return Ok(text.clone());
    }
    let texts = texts(value, at, &["input_text", "output_text"])?;
    Ok(Value::Array(
        texts
            .into_iter()
            .map(|text| json!({"type": "text", "text": text}))
            .collect(),
    ))
}

/// The texts of the parts at `at` (each `{type, text}` with a type of `kinds`).
fn texts(value: Option<&Value>, at: &str, kinds: &[&str]) -> Result<Vec<String>, ApiError> {
    let parts = list(value, at)?;
    let mut out = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let path = format!("{at}[{j}]");
        let part = object(Some(part), &path)?;
        let kind = string(part.get("type"), &format!("{path}.type"))?;
        if !kinds.contains(&kind) {
            let message = format!("content part type '{kind}' is not supported");
            return Err(bad(format!("{path}.type"), message));
        }
        out.push(string(part.get("text"), &format!("{path}.text"))?.to_owned());
    }
    Ok(out)
}
