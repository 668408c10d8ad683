//! The Messages API's response shapes: the message, its content blocks and the SSE
//! events (`event: <type>\ndata: <json>\n\n`), keys in Anthropic's order.

use serde::Serialize;
use serde_json::Value;

use crate::openai::Usage;
use crate::output::sse;

/// A content block as sent (whole, or empty in `content_block_start`).
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum BlockOut<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
}

/// Anthropic's usage: `input_tokens` are the prompt tokens the engine computed, those it
/// found in its prefix cache are `cache_read_input_tokens` (Anthropic's sum: input +
/// cache creation + cache read = the prompt); vrs writes no cache, so creation is 0.
/// `message_start` goes out before the engine's first output: its usage has the whole
/// prompt as `input_tokens` and no cache keys (not known yet); `message_delta` and the
/// whole message have the split.
#[derive(Debug, Serialize)]
pub struct MessageUsage {
    pub input_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u32>,
    pub output_tokens: u32,
}

impl MessageUsage {
    /// `message_start`'s: the prompt, no output yet, the cache split unknown.
    pub fn opening(prompt_tokens: u32) -> Self {
        Self {
            input_tokens: prompt_tokens,
            cache_creation_input_tokens: None,
            cache_read_input_tokens: None,
            output_tokens: 0,
        }
    }
}

impl From<Usage> for MessageUsage {
    fn from(u: Usage) -> Self {
        let cached = u.cached_tokens().min(u.prompt_tokens);
        Self {
            input_tokens: u.prompt_tokens - cached,
            cache_creation_input_tokens: Some(0),
            cache_read_input_tokens: Some(cached),
            output_tokens: u.completion_tokens,
        }
    }
}

/// `{"id","type":"message","role":"assistant","model","content","stop_reason","stop_sequence","usage"}`.
#[derive(Debug, Serialize)]
pub struct MessageOut<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub role: &'static str,
    pub model: &'a str,
    pub content: Vec<BlockOut<'a>>,
    pub stop_reason: Option<&'static str>,
    pub stop_sequence: Option<&'a str>,
    pub usage: MessageUsage,
}

/// A `content_block_delta`'s delta.
#[derive(Debug, Serialize)]
#[serde(tag = "type")]
pub enum DeltaOut<'a> {
    #[serde(rename = "text_delta")]
    Text { text: &'a str },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: &'a str },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: &'a str },
}

#[derive(Debug, Serialize)]
pub struct StopDelta<'a> {
    pub stop_reason: &'static str,
    pub stop_sequence: Option<&'a str>,
}

/// One stream event; its `type` is also the SSE event name.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event<'a> {
    MessageStart {
        message: MessageOut<'a>,
    },
    Ping,
    ContentBlockStart {
        index: usize,
        content_block: BlockOut<'a>,
    },
    ContentBlockDelta {
        index: usize,
        delta: DeltaOut<'a>,
    },
    ContentBlockStop {
        index: usize,
    },
    MessageDelta {
        delta: StopDelta<'a>,
        usage: MessageUsage,
    },
    MessageStop,
}

impl Event<'_> {
    fn name(&self) -> &'static str {
        match self {
            Self::MessageStart { .. } => "message_start",
            Self::Ping => "ping",
            Self::ContentBlockStart { .. } => "content_block_start",
            Self::ContentBlockDelta { .. } => "content_block_delta",
            Self::ContentBlockStop { .. } => "content_block_stop",
            Self::MessageDelta { .. } => "message_delta",
            Self::MessageStop => "message_stop",
        }
    }

    /// Appends `event: <type>\ndata: <json>\n\n` to `buf`.
    pub fn push(&self, buf: &mut Vec<u8>) {
        sse::push_typed_event(buf, self.name(), self);
    }
}
