//! The Responses API's store (`--enable-responses-store`, or vLLM's
//! `VLLM_ENABLE_RESPONSES_API_STORE=1`): the responses kept in memory, bounded (the least
//! recently used dropped first, never one still running), with what `previous_response_id`
//! continues from (the chat messages of the request and its output) and a background
//! run's task and events. Mirrors `server/routes/responses/store.py`. Behaviour:
//! docs/api.md, "Responses API: store and background".

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::edge::error::ApiError;

pub const TERMINAL: [&str; 4] = ["completed", "incomplete", "failed", "cancelled"];
/// The events that end a stream.
pub const ENDING_EVENTS: [&[u8]; 3] = [
    b"event: response.completed\n",
    b"event: response.incomplete\n",
    b"event: error\n",
];
const NO_STORE: &str = "This server does not support `store=True` and therefore does not \
     support the background mode. To enable these features, start it with \
     --enable-responses-store (or VLLM_ENABLE_RESPONSES_API_STORE=1).";

/// A kept response: the object a GET answers (updated while a background run goes on),
/// the chat messages its prompt was rendered from, its input items (ids added), and for a
/// background run its task and (when streamed) its events.
#[derive(Debug)]
pub struct Entry {
    pub response: Value,
    pub messages: Vec<Value>,
    pub items: Vec<Value>,
    pub task: Option<AbortHandle>,
    pub events: Option<Vec<Bytes>>,
}

impl Entry {
    pub fn new(response: Value, messages: Vec<Value>, items: Vec<Value>) -> Self {
        Self {
            response,
            messages,
            items,
            task: None,
            events: None,
        }
    }

    pub fn running(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }

    pub fn status(&self) -> &str {
        self.response
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    pub fn set_status(&mut self, status: &str) {
        if let Some(object) = self.response.as_object_mut() {
            object.insert("status".into(), status.into());
        }
    }

    /// A background run that ended without its response: `failed`, with the error.
    pub fn failed(&mut self, message: &str) {
        if TERMINAL.contains(&self.status()) {
            return;
        }
        self.set_status("failed");
        if let Some(object) = self.response.as_object_mut() {
            let error = json!({"code": "server_error", "message": message});
            object.insert("error".into(), error);
        }
    }
}

/// A kept entry, shared by the routes and its run; `changed` tells the stream readers.
#[derive(Debug)]
pub struct Cell {
    entry: Mutex<Entry>,
    pub changed: watch::Sender<()>,
}

impl Cell {
    pub fn new(entry: Entry) -> Arc<Self> {
        Arc::new(Self {
            entry: Mutex::new(entry),
            changed: watch::Sender::new(()),
        })
    }

    /// The entry (a poisoned lock still holds a usable entry).
    pub fn lock(&self) -> MutexGuard<'_, Entry> {
        self.entry.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn notify(&self) {
        self.changed.send_replace(());
    }
}

/// The use counter, and each entry by id with its last use.
type Entries = (u64, HashMap<String, (u64, Arc<Cell>)>);

/// The kept responses by id, at most `max_entries` (`enabled` false: none).
#[derive(Debug)]
pub struct ResponseStore {
    pub enabled: bool,
    max_entries: usize,
    entries: Mutex<Entries>,
}

impl ResponseStore {
    /// `max_entries`: `Some` with the store on.
    pub fn new(max_entries: Option<usize>) -> Self {
        Self {
            enabled: max_entries.is_some(),
            max_entries: max_entries.unwrap_or(0),
            entries: Mutex::new((0, HashMap::new())),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn len(&self) -> usize {
        self.lock().1.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The entry (now the most recently used).
    pub fn get(&self, id: &str) -> Option<Arc<Cell>> {
        let mut guard = self.lock();
        let (clock, entries) = &mut *guard;
        *clock += 1;
        let (used, cell) = entries.get_mut(id)?;
        *used = *clock;
        Some(Arc::clone(cell))
    }

    pub fn put(&self, id: &str, cell: Arc<Cell>) {
        let mut guard = self.lock();
        let (clock, entries) = &mut *guard;
        *clock += 1;
        entries.insert(id.to_owned(), (*clock, cell));
        let excess = entries.len().saturating_sub(self.max_entries);
        if excess == 0 {
            return;
        }
        // The least recently used ones that are not running (running ones are bounded by
        // admission).
        let mut idle: Vec<(u64, String)> = entries
            .iter()
            .filter(|(_, (_, c))| !c.lock().running())
            .map(|(k, (used, _))| (*used, k.clone()))
            .collect();
        idle.sort_unstable();
        for (_, key) in idle.into_iter().take(excess) {
            entries.remove(&key);
        }
    }

    pub fn delete(&self, id: &str) -> Option<Arc<Cell>> {
        self.lock().1.remove(id).map(|(_, cell)| cell)
    }

    /// The entry, else vLLM's 404.
    pub fn found(&self, id: &str) -> Result<Arc<Cell>, ApiError> {
        self.get(id).ok_or_else(|| not_found(id, "response_id"))
    }
}

pub fn not_found(id: &str, param: &'static str) -> ApiError {
    ApiError::NotFound {
        message: format!("Response with id '{id}' not found."),
        param: Some(param),
    }
}

#[derive(Deserialize)]
struct Peek {
    #[serde(default = "yes")]
    store: Value,
    #[serde(default)]
    background: Value,
    #[serde(default)]
    previous_response_id: Value,
}

fn yes() -> Value {
    Value::Bool(true)
}

/// What a Responses request asks of the store.
pub struct Stateful {
    /// Store the response (the store on, and the request's `store` true).
    pub keep: bool,
    pub background: bool,
    pub previous_id: Option<String>,
    pub previous: Option<Arc<Cell>>,
}

/// The body's stateful fields (a body that does not decode asks for nothing: its
/// translation refuses it).
pub fn stateful(body: &[u8], store: &ResponseStore) -> Stateful {
    let peek = serde_json::from_slice::<Peek>(body).ok();
    let flag = |v: Option<&Value>| v.and_then(Value::as_bool) == Some(true);
    let previous_id = peek
        .as_ref()
        .and_then(|p| p.previous_response_id.as_str().map(str::to_owned));
    let previous = previous_id.as_deref().and_then(|id| store.get(id));
    Stateful {
        keep: store.enabled && flag(peek.as_ref().map(|p| &p.store)),
        background: flag(peek.as_ref().map(|p| &p.background)),
        previous_id,
        previous,
    }
}

/// vLLM's answers, after the body's own checks: background without the store is a 400;
/// an unknown `previous_response_id` a 404.
pub fn check(asked: &Stateful, store: &ResponseStore) -> Result<(), ApiError> {
    if asked.background && !store.enabled {
        return Err(ApiError::bad("background", NO_STORE));
    }
    match (&asked.previous_id, &asked.previous) {
        (Some(id), None) => Err(not_found(id, "previous_response_id")),
        _ => Ok(()),
    }
}

/// The function-call ids `cell`'s history declared (a new input may answer them).
pub fn known_calls(cell: Option<&Arc<Cell>>) -> HashSet<String> {
    let Some(cell) = cell else {
        return HashSet::new();
    };
    history(&cell.lock())
        .iter()
        .filter_map(|m| m.get("tool_calls").and_then(Value::as_array))
        .flatten()
        .filter_map(|call| call.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// What a request continuing `entry` renders before its own input, as vLLM renders it:
/// the entry's chat messages without their system ones (instructions do not carry over),
/// then its output: each output text an assistant message (reasoning is not carried);
/// function calls (which vLLM drops) an assistant message's tool calls, so that the new
/// input may answer them.
pub fn history(entry: &Entry) -> Vec<Value> {
    let mut out: Vec<Value> = entry
        .messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) != Some("system"))
        .cloned()
        .collect();
    let output = entry.response.get("output").and_then(Value::as_array);
    let mut calls: Option<usize> = None; // the index of the message collecting calls
    for item in output.into_iter().flatten() {
        let text = |key: &str| item.get(key).cloned().unwrap_or(Value::Null);
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                calls = None;
                let parts = item.get("content").and_then(Value::as_array);
                for part in parts.into_iter().flatten() {
                    let content = part.get("text").cloned().unwrap_or_else(|| "".into());
                    out.push(json!({"role": "assistant", "content": content}));
                }
            }
            Some("function_call") => {
                let call = json!({"id": text("call_id"), "type": "function",
                                  "function": {"name": text("name"),
                                               "arguments": text("arguments")}});
                let index = *calls.get_or_insert_with(|| {
                    out.push(json!({"role": "assistant", "tool_calls": []}));
                    out.len() - 1
                });
                if let Some(list) = out[index]["tool_calls"].as_array_mut() {
                    list.push(call);
                }
            }
            _ => {}
        }
    }
    out
}

/// The translated messages with `previous`'s history after the instructions.
pub fn continued(messages: &mut Vec<Value>, instructions: bool, previous: Option<&Arc<Cell>>) {
    let Some(cell) = previous else { return };
    let head = usize::from(instructions).min(messages.len());
    let history = history(&cell.lock());
    messages.splice(head..head, history);
}

/// A request's input as items with ids (`GET .../input_items`): a string is one user
/// message.
pub fn input_items(input: Option<&Value>) -> Vec<Value> {
    let items = match input {
        Some(Value::String(text)) => vec![json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": text}]})],
        Some(Value::Array(items)) => items.clone(),
        _ => Vec::new(),
    };
    items
        .into_iter()
        .filter_map(|item| match item {
            Value::Object(map) => Some(Value::Object(with_id(map))),
            _ => None,
        })
        .collect()
}

fn with_id(mut item: Map<String, Value>) -> Map<String, Value> {
    let kind = item
        .entry("type")
        .or_insert_with(|| "message".into())
        .as_str()
        .unwrap_or("")
        .to_owned();
    if !item.contains_key("id") {
        let prefix = match kind.as_str() {
            "message" => "msg",
            "function_call" => "fc",
            "reasoning" => "rs",
            "function_call_output" => "fco",
            _ => "item",
        };
        let id = format!("{prefix}_{}", uuid::Uuid::new_v4().simple());
        item.insert("id".into(), id.into());
    }
    if kind == "message" {
        if let Some(Value::String(text)) = item.get("content").cloned() {
            let assistant = item.get("role").and_then(Value::as_str) == Some("assistant");
            let part = if assistant {
                "output_text"
            } else {
                "input_text"
            };
            item.insert("content".into(), json!([{"type": part, "text": text}]));
        }
    }
    item
}

#[cfg(test)]
mod tests;
