//! A chat message as the chat template sees it ([`message_json`]), and the text `echo`
//! puts before an answer ([`echoed`]). Mirrors `chat_messages` in
//! `server/validate/params.py`.

use serde_json::{Map, Value};

use crate::edge::error::ApiError;
use crate::openai::{ChatMessage, MessageContent};
use crate::validate::prompt::tool_calls::template_tool_calls;

/// The text `echo` puts before a chat answer: the last message's, when it is the
/// assistant's (text parts joined as the template sees them).
pub(super) fn echoed(message: &ChatMessage) -> Option<String> {
    if message.role != "assistant" {
        return None;
    }
    match &message.content {
        None => None,
        Some(MessageContent::Text(text)) => Some(text.clone()),
        Some(MessageContent::Parts(parts)) => Some(
            parts
                .iter()
                .filter(|p| p.kind == "text")
                .filter_map(|p| p.text.as_deref())
                .collect::<Vec<_>>()
                .join("\n"),
        ),
    }
}

/// A message as the template will see it: absent fields left out (the fields vLLM drops
/// unread too: `refusal`, `annotations`, `audio`, `function_call`), an assistant message's
/// reasoning as `reasoning` and `reasoning_content`, a content list checked to hold text
/// parts only and kept as `{"type": "text", "text": ...}` parts (the template's content
/// format joins them or not: `vrs_text::ContentFormat`), an assistant message's tool calls'
/// arguments as objects (`tool_calls.rs`; an empty list left out).
pub fn message_json(index: usize, mut message: ChatMessage) -> Result<Value, ApiError> {
    let reasoning = message.take_reasoning();
    let assistant = message.role == "assistant";
    let mut out = Map::new();
    out.insert("role".into(), Value::String(message.role));
    let content = match message.content {
        None => Value::Null,
        Some(MessageContent::Text(text)) => Value::String(text),
        Some(MessageContent::Parts(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                let param = format!("messages[{index}].content[{j}]");
                match (part.kind.as_str(), part.text) {
                    ("text", Some(text)) => {
                        let mut item = Map::new();
                        item.insert("type".into(), Value::String("text".into()));
                        item.insert("text".into(), Value::String(text));
                        texts.push(Value::Object(item));
                    }
                    ("text", None) => {
                        let message = format!("`{param}` is a text part without `text`");
                        return Err(ApiError::bad(param, message));
                    }
                    (other, _) => {
                        let message = format!(
                            "`{param}` is a content part of type `{other}`; only text parts \
                             (type `text`) are supported"
                        );
                        return Err(ApiError::bad(param, message));
                    }
                }
            }
            Value::Array(texts)
        }
    };
    out.insert("content".into(), content);
    if let Some(name) = message.name {
        out.insert("name".into(), Value::String(name));
    }
    if let Some(calls) = message.tool_calls {
        let calls = if assistant {
            template_tool_calls(calls, &format!("messages[{index}].tool_calls"))?
        } else {
            calls
        };
        if !calls.is_empty() || !assistant {
            out.insert("tool_calls".into(), Value::Array(calls));
        }
    }
    if let Some(id) = message.tool_call_id {
        out.insert("tool_call_id".into(), Value::String(id));
    }
    if let Some(reasoning) = reasoning {
        // under both names, as vLLM gives it
        out.insert("reasoning".into(), Value::String(reasoning.clone()));
        out.insert("reasoning_content".into(), Value::String(reasoning));
    }
    Ok(Value::Object(out))
}
