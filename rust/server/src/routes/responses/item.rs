//! One output item of a response being generated: its kind (reasoning, message, function
//! call), id, text, and a message's logprobs; its JSON as it starts and when whole. Part of
//! `server/routes/responses/events.py` (`_Item`).

use serde_json::{json, Value};

use crate::logprobs::TokenLogprob;

use super::wire::Streamed;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    Reasoning,
    Message,
    /// A function call: its chat tool-call id and name.
    Call {
        call_id: String,
        name: String,
    },
}

/// One output item: its id, kind and text (reasoning / message text, or arguments), and
/// a message's logprobs (those of the pieces its text came from).
#[derive(Debug)]
pub(super) struct Item {
    pub(super) id: String,
    pub(super) kind: Kind,
    pub(super) text: String,
    pub(super) logprobs: Vec<TokenLogprob>,
}

pub(super) fn fresh(prefix: &str) -> String {
    format!("{prefix}_{}", uuid::Uuid::new_v4().simple())
}

impl Item {
    /// An item of `kind` with nothing yet.
    pub(super) fn new(kind: Kind) -> Self {
        let prefix = match kind {
            Kind::Reasoning => "rs",
            Kind::Message => "msg",
            Kind::Call { .. } => "fc",
        };
        Self {
            id: fresh(prefix),
            kind,
            text: String::new(),
            logprobs: Vec::new(),
        }
    }

    /// The item's JSON: `done` whole (status completed), else as it starts.
    pub(super) fn json(&self, done: bool) -> Value {
        let status = if done { "completed" } else { "in_progress" };
        match &self.kind {
            Kind::Reasoning => {
                let content = if done {
                    json!([{"type": "reasoning_text", "text": self.text}])
                } else {
                    json!([])
                };
                json!({"id": self.id, "type": "reasoning", "summary": [], "content": content,
                       "status": status})
            }
            Kind::Message => {
                let content = if done {
                    json!([self.part()])
                } else {
                    json!([])
                };
                json!({"id": self.id, "type": "message", "status": status, "role": "assistant",
                       "content": content})
            }
            Kind::Call { call_id, name, .. } => {
                let arguments = if done { self.text.as_str() } else { "" };
                json!({"id": self.id, "type": "function_call", "status": status,
                       "call_id": call_id, "name": name, "arguments": arguments})
            }
        }
    }

    /// The content part of a reasoning or message item, as it is now.
    pub(super) fn part(&self) -> Value {
        match self.kind {
            Kind::Reasoning => json!({"type": "reasoning_text", "text": self.text}),
            _ => output_text(&self.text, &self.logprobs),
        }
    }

    /// A message's logprobs as the text done event carries them.
    pub(super) fn streamed_logprobs(&self) -> Value {
        serde_json::to_value(Streamed(&self.logprobs)).unwrap_or_else(|_| json!([]))
    }
}

/// An `output_text` content part (its logprobs with `bytes`, as the output item has them).
pub(super) fn output_text(text: &str, logprobs: &[TokenLogprob]) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs})
}

/// The empty content part that `response.content_part.added` shows.
pub(super) fn empty_part(kind: &Kind) -> Value {
    match kind {
        Kind::Reasoning => json!({"type": "reasoning_text", "text": ""}),
        _ => output_text("", &[]),
    }
}
