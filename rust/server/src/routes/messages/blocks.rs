//! `messages` → chat messages: text blocks → text parts, a user's `tool_result`s → tool
//! messages (before the rest of that user message), an assistant's `tool_use`s →
//! `tool_calls`, its `thinking` → `reasoning_content`, `system` messages → the system prompt
//! or system messages. Mirrors `server/routes/messages/blocks.py`.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::json::{
    at, boolean, cache_control, get, invalid, join, known_keys, need, object, one_of, string,
    system_text, text_block, text_of, unsupported_block,
};
use crate::edge::error::ApiError;

/// The chat messages of `list` (checked non-empty by the caller) after the system prompt
/// `system`. A `system` message's text joins that prompt when `merge_system` (the chat
/// template takes no system message after the first), else it stays a system message in
/// place.
pub fn messages(
    list: &[Value],
    system: String,
    merge_system: bool,
) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::with_capacity(list.len() + 1);
    let mut system = system;
    let mut call_ids = HashSet::new();
    for (i, message) in list.iter().enumerate() {
        let path = at("messages", i);
        let map = object(message, &path)?;
        known_keys(map, &["role", "content"], &path)?;
        let role = one_of(
            need(map, "role", &path)?,
            &join(&path, "role"),
            &["user", "assistant", "system"],
        )?;
        let content = need(map, "content", &path)?;
        let cpath = join(&path, "content");
        let blocks = match content {
            Value::String(_) => None,
            Value::Array(blocks) if blocks.is_empty() => {
                return Err(ApiError::bad(
                    cpath,
                    "at least one content block is required",
                ))
            }
            Value::Array(blocks) => Some(blocks),
            _ => return Err(invalid(&cpath, "a string or a list")),
        };
        match (role, blocks) {
            ("system", _) => {
                let text = system_text(content, &cpath, true)?;
                if merge_system {
                    system.push_str(&text);
                } else if !text.is_empty() {
                    out.push(chat_message("system", Value::String(text)));
                }
            }
            (_, None) => out.push(chat_message(role, content.clone())),
            ("user", Some(blocks)) => user(blocks, &cpath, &call_ids, &mut out)?,
            (_, Some(blocks)) => out.push(assistant(blocks, &cpath, &mut call_ids)?),
        }
    }
    if !system.is_empty() {
        out.insert(0, chat_message("system", Value::String(system)));
    }
    Ok(out)
}

fn chat_message(role: &str, content: Value) -> Value {
    let mut m = Map::new();
    m.insert("role".into(), Value::String(role.to_owned()));
    m.insert("content".into(), content);
    Value::Object(m)
}

fn text_part(text: &str) -> Value {
    let mut part = Map::new();
    part.insert("type".into(), Value::String("text".into()));
    part.insert("text".into(), Value::String(text.to_owned()));
    Value::Object(part)
}

/// A block's map and `type`.
fn block<'a>(value: &'a Value, path: &str) -> Result<(&'a Map<String, Value>, &'a str), ApiError> {
    let map = object(value, path)?;
    let kind = string(need(map, "type", path)?, &join(path, "type"))?;
    Ok((map, kind))
}

/// A user message: its tool results first (tool messages), then its text (one user
/// message, unless the message held tool results only).
fn user(
    blocks: &[Value],
    path: &str,
    call_ids: &HashSet<String>,
    out: &mut Vec<Value>,
) -> Result<(), ApiError> {
    let mut parts = Vec::new();
    let mut results = 0;
    for (j, value) in blocks.iter().enumerate() {
        let bpath = at(path, j);
        let (map, kind) = block(value, &bpath)?;
        match kind {
            "text" => parts.push(text_part(text_block(map, &bpath)?)),
            "tool_result" => {
                out.push(tool_result(map, &bpath, call_ids)?);
                results += 1;
            }
            "tool_use" | "thinking" | "redacted_thinking" => {
                return Err(unsupported_block(
                    &join(&bpath, "type"),
                    kind,
                    " in a user message",
                ))
            }
            other => return Err(unsupported_block(&join(&bpath, "type"), other, "")),
        }
    }
    if !parts.is_empty() || results == 0 {
        out.push(chat_message("user", Value::Array(parts)));
    }
    Ok(())
}

/// `{"role": "tool", "tool_call_id", "content"}` of a `tool_result` block.
fn tool_result(
    map: &Map<String, Value>,
    path: &str,
    call_ids: &HashSet<String>,
) -> Result<Value, ApiError> {
    known_keys(
        map,
        &[
            "type",
            "tool_use_id",
            "content",
            "is_error",
            "cache_control",
        ],
        path,
    )?;
    let id_path = join(path, "tool_use_id");
    let id = string(need(map, "tool_use_id", path)?, &id_path)?;
    if !call_ids.contains(id) {
        return Err(ApiError::bad(
            id_path,
            format!("tool_result for unknown tool_use_id '{id}'"),
        ));
    }
    let mut text = match get(map, "content") {
        None => String::new(),
        Some(content) => text_of(content, &join(path, "content"))?,
    };
    if let Some(flag) = get(map, "is_error") {
        if boolean(flag, &join(path, "is_error"))? {
            text.insert_str(0, "Error: ");
        }
    }
    cache_control(map, path)?;
    let mut m = Map::new();
    m.insert("role".into(), Value::String("tool".into()));
    m.insert("tool_call_id".into(), Value::String(id.to_owned()));
    m.insert("content".into(), Value::String(text));
    Ok(Value::Object(m))
}

/// An assistant message: text parts, `tool_calls`, `reasoning_content` (thinking blocks
/// joined). Without text blocks but with calls it has no `content`.
fn assistant(
    blocks: &[Value],
    path: &str,
    call_ids: &mut HashSet<String>,
) -> Result<Value, ApiError> {
    let mut parts = Vec::new();
    let mut calls = Vec::new();
    let mut thinking: Vec<&str> = Vec::new();
    for (j, value) in blocks.iter().enumerate() {
        let bpath = at(path, j);
        let (map, kind) = block(value, &bpath)?;
        match kind {
            "text" => parts.push(text_part(text_block(map, &bpath)?)),
            "tool_use" => {
                let (id, call) = tool_use(map, &bpath)?;
                call_ids.insert(id);
                calls.push(call);
            }
            "thinking" => {
                known_keys(map, &["type", "thinking", "signature"], &bpath)?;
                if let Some(signature) = get(map, "signature") {
                    string(signature, &join(&bpath, "signature"))?;
                }
                thinking.push(string(
                    need(map, "thinking", &bpath)?,
                    &join(&bpath, "thinking"),
                )?);
            }
            "redacted_thinking" => {
                // opaque (encrypted) reasoning of another server: nothing to render
                known_keys(map, &["type", "data"], &bpath)?;
                string(need(map, "data", &bpath)?, &join(&bpath, "data"))?;
            }
            "tool_result" => {
                return Err(unsupported_block(
                    &join(&bpath, "type"),
                    kind,
                    " in an assistant message",
                ))
            }
            other => return Err(unsupported_block(&join(&bpath, "type"), other, "")),
        }
    }
    let mut m = Map::new();
    m.insert("role".into(), Value::String("assistant".into()));
    if !parts.is_empty() || calls.is_empty() {
        m.insert("content".into(), Value::Array(parts));
    }
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    if !thinking.is_empty() {
        m.insert("reasoning_content".into(), Value::String(thinking.concat()));
    }
    Ok(Value::Object(m))
}

/// A `tool_use` block's id and chat tool call (`arguments`: `input` as compact JSON, key
/// order and non-ASCII kept).
fn tool_use(map: &Map<String, Value>, path: &str) -> Result<(String, Value), ApiError> {
    known_keys(map, &["type", "id", "name", "input", "cache_control"], path)?;
    let id = string(need(map, "id", path)?, &join(path, "id"))?;
    let name = string(need(map, "name", path)?, &join(path, "name"))?;
    let input = need(map, "input", path)?;
    object(input, &join(path, "input"))?;
    cache_control(map, path)?;
    let arguments = serde_json::to_string(input)
        .map_err(|e| ApiError::Internal(format!("tool_use input: {e}")))?;
    let mut function = Map::new();
    function.insert("name".into(), Value::String(name.to_owned()));
    function.insert("arguments".into(), Value::String(arguments));
    let mut call = Map::new();
    call.insert("id".into(), Value::String(id.to_owned()));
    call.insert("type".into(), Value::String("function".into()));
    call.insert("function".into(), Value::Object(function));
    Ok((id.to_owned(), Value::Object(call)))
}
