//! The bookkeeping of one streamed response while its chunks arrive: the times (TTFT,
//! ITL, the end), the usage, and for a conversation's turn the answer's text.

use std::time::Instant;

use crate::args::Backend;
use crate::payload::{self, Payload};

/// A conversation turn's answer: its text (the next turn's history) and the server's
/// prompt counts.
#[derive(Debug, Default)]
pub(super) struct Answer {
    pub text: String,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
}

/// Per-stream bookkeeping while the chunks of one response arrive.
pub(super) struct StreamState {
    backend: Backend,
    pub start: Instant,
    /// The first chunk with generated output (TTFT).
    pub first: Option<Instant>,
    /// The first chunk with any choice: TTFT when no chunk carries output (vLLM's rule).
    pub first_choice: Option<Instant>,
    last: Instant,
    pub done: Option<Instant>,
    pub chunks: usize,
    pub usage: Option<u64>,
    pub itl: Vec<f64>,
    pub failure: Option<String>,
    /// Times the request was sent again on a new connection (0 or 1).
    pub retries: usize,
    /// Kept for a conversation's turn (chat completions only).
    pub answer: Option<Answer>,
}

impl StreamState {
    pub fn new(backend: Backend, start: Instant, keep_answer: bool) -> Self {
        Self {
            backend,
            start,
            first: None,
            first_choice: None,
            last: start,
            done: None,
            chunks: 0,
            usage: None,
            itl: Vec::new(),
            failure: None,
            retries: 0,
            answer: keep_answer.then(Answer::default),
        }
    }

    pub fn on_payload(&mut self, data: &[u8], now: Instant) {
        if self.done.is_some() || self.failure.is_some() {
            return;
        }
        if let Some(answer) = &mut self.answer {
            let turn = payload::chat_turn(data);
            answer.text.push_str(&turn.text);
            answer.prompt_tokens = turn.prompt_tokens.or(answer.prompt_tokens);
            answer.cached_tokens = turn.cached_tokens.or(answer.cached_tokens);
        }
        match payload::parse(self.backend, data) {
            Ok(Payload::Done) => self.done = Some(now),
            Ok(Payload::Final { completion_tokens }) => {
                if completion_tokens.is_some() {
                    self.usage = completion_tokens;
                }
                self.first_choice.get_or_insert(now);
                self.done = Some(now);
            }
            Ok(Payload::Error(message)) => self.failure = Some(message),
            Err(message) => self.failure = Some(message),
            Ok(Payload::Chunk {
                content,
                choices,
                completion_tokens,
            }) => {
                if completion_tokens.is_some() {
                    self.usage = completion_tokens;
                }
                if choices && self.first_choice.is_none() {
                    self.first_choice = Some(now);
                }
                if content {
                    if self.first.is_none() {
                        self.first = Some(now);
                    } else {
                        self.itl.push((now - self.last).as_secs_f64());
                    }
                    self.last = now;
                    self.chunks += 1;
                }
            }
        }
    }
}
