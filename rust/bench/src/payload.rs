//! What one server-sent event's `data` means to the benchmark, for each backend's API:
//! OpenAI's chunks (`payload/chat.rs`, completions and chat), the Responses API's typed
//! events (`payload/responses.rs`) and Anthropic's Messages events
//! (`payload/messages.rs`). The metric definitions are the same for all of them. A pooling
//! backend's answer is one JSON body, not a stream (`payload/embeddings.rs`).

mod chat;
pub mod embeddings;
mod messages;
mod responses;

use crate::args::Backend;

pub use chat::{turn as chat_turn, TurnChunk};

/// One event's meaning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// The stream is over: `[DONE]`, Anthropic's `message_stop`.
    Done,
    /// An event. `content` is true when it carries generated output (text, reasoning or
    /// tool-call pieces); role-only, empty and bookkeeping events are not content.
    /// `choices` is true when it is about the output at all (a chunk with a choice, an
    /// item or block starting or ending, the finish): the time of the first such event is
    /// TTFT for a stream that never carries content.
    Chunk {
        content: bool,
        choices: bool,
        completion_tokens: Option<u64>,
    },
    /// The last event, carrying the usage: the Responses API's `response.completed` /
    /// `response.incomplete` (there is no `[DONE]` there).
    Final { completion_tokens: Option<u64> },
    /// The server reported an error inside the stream.
    Error(String),
}

/// Classifies one event's data for `backend`; `Err` when it is not JSON that API's server
/// would send (a pooling backend's server sends no events).
pub fn parse(backend: Backend, data: &[u8]) -> Result<Payload, String> {
    match backend {
        Backend::OpenaiCompletions | Backend::OpenaiChat => chat::parse(data),
        Backend::OpenaiResponses => responses::parse(data),
        Backend::AnthropicMessages => messages::parse(data),
        Backend::OpenaiEmbeddings => Err(format!(
            "a server-sent event for backend {}, which is not streamed",
            backend.name()
        )),
    }
}

/// The error for data that is not the JSON the stream should carry.
fn unreadable(data: &[u8], error: serde_json::Error) -> String {
    let shown = String::from_utf8_lossy(&data[..data.len().min(120)]).into_owned();
    format!("unreadable stream chunk ({error}): {shown}")
}

fn non_empty(text: &Option<std::borrow::Cow<'_, str>>) -> bool {
    text.as_deref().is_some_and(|t| !t.is_empty())
}
