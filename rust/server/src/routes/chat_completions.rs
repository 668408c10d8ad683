//! `POST /v1/chat/completions`, and loading the model's text assets.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;

use crate::dispatch::{generate, AcceptedRequest};
use crate::logprobs::ChatLogprobs;
use crate::openai::{ChatChunk, ChatChunkChoice, ChatCompletion, Delta, Header, Usage};
use crate::output::choice::ChatChoiceState;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::output::sse;
use crate::state::{AppState, SharedState};
use crate::validate::prompt::{self};

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(&state, body, prompt::chat, |job, state| {
        Ok(ChatShapes::new(job, state))
    })
    .await
}

/// Chat response shapes: one state per choice.
pub struct ChatShapes {
    id: String,
    created: u64,
    model: Arc<str>,
    choices: Vec<ChatChoiceState>,
}

impl ChatShapes {
    pub fn new(job: &AcceptedRequest, state: &AppState) -> Self {
        let settings = &job.prompt.settings;
        let top = settings.sampling.logprobs.map(|k| k as usize);
        let reasoning = state.options.reasoning_parser.is_some();
        let choices = match &job.prompt.chat {
            Some(chat) => (0..settings.n)
                .map(|i| {
                    ChatChoiceState::new(i, chat, reasoning, top, Arc::clone(&state.token_texts))
                })
                .collect(),
            None => Vec::new(),
        };
        Self {
            id: job.id.clone(),
            created: job.created,
            model: state.model_name(),
            choices,
        }
    }

    fn header(&self, object: &'static str) -> Header<'_> {
        Header {
            id: &self.id,
            object,
            created: self.created,
            model: &self.model,
        }
    }

    fn chunk(&self, buf: &mut Vec<u8>, choices: Vec<ChatChunkChoice>, usage: Option<Usage>) {
        let chunk = ChatChunk {
            header: self.header("chat.completion.chunk"),
            choices,
            usage,
        };
        sse::push_event(buf, &chunk);
    }
}

impl Shapes for ChatShapes {
    fn start(&self, buf: &mut Vec<u8>) {
        for choice in 0..self.choices.len() {
            let delta = Delta {
                role: Some("assistant"),
                content: Some(String::new()),
                ..Delta::default()
            };
            let start = ChatChunkChoice {
                index: u32::try_from(choice).unwrap_or(u32::MAX),
                delta,
                logprobs: None,
                finish_reason: None,
            };
            self.chunk(buf, vec![start], None);
        }
    }

    fn step(&mut self, index: usize, piece: Piece, buf: &mut Vec<u8>) {
        let Some(choice) = self.choices.get_mut(index) else {
            return;
        };
        let mut delta = choice.step(piece);
        if delta.is_empty() {
            return;
        }
        let chunk = ChatChunkChoice {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            delta: delta.delta(),
            logprobs: delta
                .logprobs
                .take()
                .map(|content| ChatLogprobs { content }),
            finish_reason: delta.finish,
        };
        self.chunk(buf, vec![chunk], None);
    }

    fn absorb(&mut self, index: usize, piece: Piece) {
        if let Some(choice) = self.choices.get_mut(index) {
            choice.step(piece);
        }
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        self.chunk(buf, Vec::new(), Some(usage));
    }

    fn body(self, usage: Usage) -> Vec<u8> {
        let body = ChatCompletion {
            header: Header {
                id: &self.id,
                object: "chat.completion",
                created: self.created,
                model: &self.model,
            },
            choices: self
                .choices
                .into_iter()
                .map(ChatChoiceState::choice)
                .collect(),
            usage,
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}
