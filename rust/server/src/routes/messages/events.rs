//! One chat choice's deltas → Anthropic content blocks (whole) and the Messages events
//! (streamed). Mirrors `server/routes/messages/events.py`. Behaviour: docs/api.md,
//! "Response".

use std::sync::Arc;

use serde_json::{Map, Value};

use super::wire::{BlockOut, DeltaOut, Event, MessageOut, MessageUsage, StopDelta};
use crate::openai::Usage;
use crate::output::choice::{ChatChoiceState, ChatDelta};
use crate::output::generation::Piece;
use crate::parsers::tools::CallDelta;

/// A content block as it grows.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Thinking(String),
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// The chat tool call's index.
        call: usize,
        arguments: String,
    },
}

impl Block {
    /// The block as sent: whole, or (`empty`) as `content_block_start` opens it.
    fn out(&self, empty: bool) -> BlockOut<'_> {
        match self {
            Self::Thinking(t) => BlockOut::Thinking {
                thinking: if empty { "" } else { t },
                signature: "",
            },
            Self::Text(t) => BlockOut::Text {
                text: if empty { "" } else { t },
            },
            Self::ToolUse {
                id,
                name,
                arguments,
                ..
            } => BlockOut::ToolUse {
                id,
                name,
                input: if empty {
                    Value::Object(Map::new())
                } else {
                    input_of(arguments)
                },
            },
        }
    }
}

/// A call's arguments as `input`: the JSON object they hold, or `{}` when they are not
/// one (cut off by `max_tokens`).
pub fn input_of(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::Object(Map::new()),
    }
}

/// The Anthropic `stop_reason` of a chat finish reason (`stop_sequence`: the stop string
/// that ended the generation).
pub fn stop_reason(finish: Option<&str>, stop_sequence: Option<&str>) -> &'static str {
    match finish {
        Some("tool_calls") => "tool_use",
        Some("length") => "max_tokens",
        _ if stop_sequence.is_some() => "stop_sequence",
        _ => "end_turn",
    }
}

/// The blocks of one message and, streamed, which one is open.
pub struct Message {
    pub id: String,
    pub model: Arc<str>,
    pub input_tokens: u32,
    choice: ChatChoiceState,
    blocks: Vec<Block>,
    /// Streamed: the block started and not yet stopped.
    open: Option<usize>,
    finish: Option<&'static str>,
    stop_sequence: Option<String>,
}

impl Message {
    pub fn new(id: String, model: Arc<str>, input_tokens: u32, choice: ChatChoiceState) -> Self {
        Self {
            id,
            model,
            input_tokens,
            choice,
            blocks: Vec::new(),
            open: None,
            finish: None,
            stop_sequence: None,
        }
    }

    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The message as `message_start` (`usage` None) or the response body shows it.
    fn out(&self, usage: Option<Usage>) -> MessageOut<'_> {
        let whole = usage.is_some();
        MessageOut {
            id: &self.id,
            kind: "message",
            role: "assistant",
            model: &self.model,
            content: if whole {
                self.blocks.iter().map(|b| b.out(false)).collect()
            } else {
                Vec::new()
            },
            stop_reason: whole.then(|| self.stop_reason()),
            stop_sequence: if whole {
                self.stop_sequence_shown()
            } else {
                None
            },
            usage: usage.map_or_else(|| MessageUsage::opening(self.input_tokens), Into::into),
        }
    }

    fn stop_reason(&self) -> &'static str {
        stop_reason(self.finish, self.stop_sequence.as_deref())
    }

    /// `stop_sequence`, when it is what ended the message.
    fn stop_sequence_shown(&self) -> Option<&str> {
        (self.stop_reason() == "stop_sequence")
            .then_some(self.stop_sequence.as_deref())
            .flatten()
    }

    /// `message_start` and `ping`.
    pub fn open(&self, buf: &mut Vec<u8>) {
        Event::MessageStart {
            message: self.out(None),
        }
        .push(buf);
        Event::Ping.push(buf);
    }

    /// A piece of the generation (its text, finish reason and the stop string that ended
    /// it): into the blocks, and with `buf` into events.
    pub fn piece(&mut self, mut piece: Piece, buf: Option<&mut Vec<u8>>) {
        let stop_sequence = piece.stop_sequence.take();
        let delta = self.choice.step(piece);
        self.apply(delta, stop_sequence, buf);
    }

    /// One chat delta: reasoning, content, then tool calls.
    pub fn apply(
        &mut self,
        delta: ChatDelta,
        stop_sequence: Option<String>,
        mut buf: Option<&mut Vec<u8>>,
    ) {
        if !delta.reasoning.is_empty() {
            self.text(true, &delta.reasoning, buf.as_deref_mut());
        }
        if !delta.content.is_empty() {
            self.text(false, &delta.content, buf.as_deref_mut());
        }
        for call in delta.calls {
            self.call(call, buf.as_deref_mut());
        }
        if delta.finish.is_some() {
            self.finish = delta.finish;
            self.stop_sequence = stop_sequence;
        }
    }

    /// Reasoning (`thinking`) or content text: the open block of that kind grows, or a
    /// new one starts.
    fn text(&mut self, thinking: bool, text: &str, mut buf: Option<&mut Vec<u8>>) {
        let index = match self.blocks.last_mut() {
            Some(Block::Thinking(t)) if thinking => {
                t.push_str(text);
                self.blocks.len() - 1
            }
            Some(Block::Text(t)) if !thinking => {
                t.push_str(text);
                self.blocks.len() - 1
            }
            _ => {
                let block = if thinking {
                    Block::Thinking(text.to_owned())
                } else {
                    Block::Text(text.to_owned())
                };
                self.start(block, buf.as_deref_mut())
            }
        };
        let Some(buf) = buf else { return };
        let delta = if thinking {
            DeltaOut::Thinking { thinking: text }
        } else {
            DeltaOut::Text { text }
        };
        Event::ContentBlockDelta { index, delta }.push(buf);
    }

    /// A tool call's first delta starts a `tool_use` block; the next ones add arguments.
    fn call(&mut self, call: CallDelta, buf: Option<&mut Vec<u8>>) {
        let CallDelta {
            index: call_index,
            id,
            name,
            arguments,
        } = call;
        let index = match id {
            Some(id) => {
                let block = Block::ToolUse {
                    id,
                    name: name.unwrap_or_default(),
                    call: call_index,
                    arguments: String::new(),
                };
                let mut buf = buf;
                let index = self.start(block, buf.as_deref_mut());
                self.arguments(index, &arguments, buf);
                return;
            }
            None => self
                .blocks
                .iter()
                .rposition(|b| matches!(b, Block::ToolUse { call, .. } if *call == call_index)),
        };
        if let Some(index) = index {
            self.arguments(index, &arguments, buf);
        }
    }

    fn arguments(&mut self, index: usize, more: &str, buf: Option<&mut Vec<u8>>) {
        if more.is_empty() {
            return;
        }
        if let Some(Block::ToolUse { arguments, .. }) = self.blocks.get_mut(index) {
            arguments.push_str(more);
        }
        if let Some(buf) = buf.filter(|_| self.open == Some(index)) {
            let delta = DeltaOut::InputJson { partial_json: more };
            Event::ContentBlockDelta { index, delta }.push(buf);
        }
    }

    /// Adds `block`: streamed, the open block stops and this one starts (empty).
    fn start(&mut self, block: Block, buf: Option<&mut Vec<u8>>) -> usize {
        let index = self.blocks.len();
        self.blocks.push(block);
        if let Some(buf) = buf {
            self.stop_open(buf);
            let content_block = self.blocks[index].out(true);
            Event::ContentBlockStart {
                index,
                content_block,
            }
            .push(buf);
            self.open = Some(index);
        }
        index
    }

    fn stop_open(&mut self, buf: &mut Vec<u8>) {
        if let Some(index) = self.open.take() {
            Event::ContentBlockStop { index }.push(buf);
        }
    }

    /// The stream's end: the open block stops, `message_delta`, `message_stop`.
    pub fn close(&mut self, buf: &mut Vec<u8>, usage: Usage) {
        self.stop_open(buf);
        Event::MessageDelta {
            delta: StopDelta {
                stop_reason: self.stop_reason(),
                stop_sequence: self.stop_sequence_shown(),
            },
            usage: usage.into(),
        }
        .push(buf);
        Event::MessageStop.push(buf);
    }

    /// The whole message (not streamed).
    pub fn body(&self, usage: Usage) -> Vec<u8> {
        serde_json::to_vec(&self.out(Some(usage))).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
