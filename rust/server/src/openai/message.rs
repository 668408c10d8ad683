//! One chat message as the client sent it (`messages[i]` of a chat request); what the
//! template sees of it is `crate::validate::prompt::message_json`'s. Mirrors
//! `ChatMessage` in `server/openai.py`.

use serde::Deserialize;
use serde_json::{Map, Value};

/// One chat message as the client sent it; keys it does not name are dropped (vLLM takes
/// and drops them too: its `test_extra_fields_allowed`), so the template never sees them.
#[derive(Debug, Deserialize, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
    /// vLLM's name of `reasoning_content` (it wins when both are set).
    #[serde(default)]
    pub reasoning: Option<String>,
    /// What the openai SDK's `ChatCompletionMessage` carries back; vLLM drops them
    /// unread, and so does the template input.
    #[serde(default)]
    pub refusal: Option<String>,
    #[serde(default)]
    pub annotations: Option<Vec<Value>>,
    #[serde(default)]
    pub audio: Option<Map<String, Value>>,
    #[serde(default)]
    pub function_call: Option<Map<String, Value>>,
}

impl ChatMessage {
    /// An assistant message's reasoning: `reasoning` (vLLM's name), else
    /// `reasoning_content`; `None` for other roles (vLLM gives the template none).
    pub fn take_reasoning(&mut self) -> Option<String> {
        if self.role != "assistant" {
            return None;
        }
        self.reasoning
            .take()
            .or_else(|| self.reasoning_content.take())
    }
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(untagged, expecting = "a string or a list of content parts")]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize, PartialEq)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}
