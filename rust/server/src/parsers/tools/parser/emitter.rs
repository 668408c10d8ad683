//! The deltas a [`ToolCallParser`](super::ToolCallParser) gives, and the emitter that
//! makes them from its grammar's events: a committed call's first delta carries a new
//! id and the name, later pieces of the same call in one push merge into one delta;
//! with `parallel_tool_calls` false, calls after the first are dropped. Under a forcing
//! `tool_choice` (`required`, named) the output is calls only, as in vLLM: text that is
//! no call (a call cut by `max_tokens` before it committed) is never content.

use serde_json::Value;

/// A piece of one call: the first of a call has `id` and `name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallDelta {
    pub index: usize,
    pub id: Option<String>,
    pub name: Option<String>,
    pub arguments: String,
}

/// What one push gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolDelta {
    pub content: String,
    pub calls: Vec<CallDelta>,
}

/// A whole call: the accumulation of its deltas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl ToolCall {
    /// Adds `deltas` to the calls accumulated so far.
    pub fn accumulate(calls: &mut Vec<ToolCall>, deltas: &[CallDelta]) {
        for d in deltas {
            match (&d.id, &d.name) {
                (Some(id), Some(name)) if d.index == calls.len() => calls.push(ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: d.arguments.clone(),
                }),
                _ => {
                    if let Some(call) = calls.get_mut(d.index) {
                        call.arguments.push_str(&d.arguments);
                    }
                }
            }
        }
    }
}

/// A new call id (`mistral`: 9 characters `[A-Za-z0-9]`).
pub fn new_call_id(mistral: bool) -> String {
    let uuid = uuid::Uuid::new_v4();
    if mistral {
        const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        return uuid.as_bytes()[..9]
            .iter()
            .map(|b| ALNUM[usize::from(*b) % ALNUM.len()] as char)
            .collect();
    }
    format!("call_{}", &uuid.simple().to_string()[..24])
}

/// Turns grammar events into deltas: ids, indexes, merging, `parallel_tool_calls`.
#[derive(Debug)]
pub(super) struct Emitter {
    /// `(name, parameters)` of each tool.
    pub(super) tools: Vec<(String, Option<Value>)>,
    pub(super) parallel: bool,
    pub(super) mistral: bool,
    /// `tool_choice` forces calls: no content.
    pub(super) forced: bool,
    pub(super) made: usize,
    pub(super) dropping: bool,
    pub(super) delta: ToolDelta,
}

impl Emitter {
    pub(super) fn known(&self, name: &str) -> bool {
        self.tools.iter().any(|(n, _)| n == name)
    }

    pub(super) fn parameters(&self, name: &str) -> Option<Value> {
        self.tools.iter().find(|(n, _)| n == name)?.1.clone()
    }

    pub(super) fn content(&mut self, text: &str) {
        if !self.forced {
            self.delta.content.push_str(text);
        }
    }

    pub(super) fn commit(&mut self, name: String, arguments: &str) {
        self.dropping = self.made >= 1 && !self.parallel;
        if self.dropping {
            return;
        }
        self.delta.calls.push(CallDelta {
            index: self.made,
            id: Some(new_call_id(self.mistral)),
            name: Some(name),
            arguments: arguments.to_owned(),
        });
        self.made += 1;
    }

    pub(super) fn arguments(&mut self, piece: &str) {
        if self.dropping || piece.is_empty() || self.made == 0 {
            return;
        }
        let index = self.made - 1;
        match self.delta.calls.last_mut() {
            Some(last) if last.index == index => last.arguments.push_str(piece),
            _ => self.delta.calls.push(CallDelta {
                index,
                id: None,
                name: None,
                arguments: piece.to_owned(),
            }),
        }
    }
}
