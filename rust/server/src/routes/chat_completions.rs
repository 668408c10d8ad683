//! `POST /v1/chat/completions`: its response shapes (roles, `echo`, `prompt_logprobs`,
//! continuous usage).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;

use crate::dispatch::{generate, AcceptedRequest};
use crate::edge::error::ApiError;
use crate::logprobs::{ChatLogprobs, PromptLogprobs, TokenTexts};
use crate::openai::{ChatChunk, ChatChunkChoice, ChatCompletion, Delta, Header, Usage};
use crate::output::choice::ChatChoiceState;
use crate::output::content_chunk::ContentChunks;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::output::sse;
use crate::state::{AppState, SharedState};
use crate::validate::prompt::{self};

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let build = |state, body| async move { prompt::chat(state, body).await.map(|p| vec![p]) };
    generate(&state, body, build, ChatShapes::new).await
}

/// Chat response shapes: one state per choice. With `prompt_logprobs` a stream's
/// opening chunks (roles, echo) wait for the first piece, whose prompt logprobs the first
/// chunk carries.
pub struct ChatShapes {
    id: String,
    created: u64,
    model: Arc<str>,
    choices: Vec<ChatChoiceState>,
    /// `echo` with the assistant's last message: its content.
    echo: Option<String>,
    prompt_len: usize,
    /// `prompt_logprobs`: the top k per prompt token.
    prompt_top: Option<usize>,
    prompt_logprobs: Option<PromptLogprobs>,
    texts: Arc<TokenTexts>,
    /// The opening chunks wait for the first piece.
    deferred: bool,
    /// `stream_options.continuous_usage_stats`: usage on every chunk.
    continuous: bool,
    /// The chunks of tokens that bring only text.
    content_chunks: ContentChunks,
    /// `return_token_ids`: the prompt's ids, on each role chunk and the body.
    prompt_ids: Option<Vec<u32>>,
}

impl ChatShapes {
    pub fn new(job: &AcceptedRequest, state: &AppState) -> Result<Self, ApiError> {
        let prompt = job.prompt()?;
        let settings = &prompt.settings;
        let top = settings.sampling.logprobs.map(|k| k as usize);
        let reasoning = state
            .options
            .reasoning_parser
            .and_then(crate::parsers::reasoning::markers_of);
        let choices = match &prompt.chat {
            Some(chat) => (0..settings.n)
                .map(|i| {
                    ChatChoiceState::new(i, chat, reasoning, top, Arc::clone(&state.token_texts))
                        .shown(&settings.extras)
                })
                .collect(),
            None => Vec::new(),
        };
        let prompt_top = settings.prompt_logprobs.map(|k| k as usize);
        let model = state.model_name();
        let content_chunks = ContentChunks::new(&Header {
            id: &job.id,
            object: "chat.completion.chunk",
            created: job.created,
            model: &model,
        });
        Ok(Self {
            id: job.id.clone(),
            created: job.created,
            model,
            choices,
            echo: prompt.chat.as_ref().and_then(|c| c.echo.clone()),
            prompt_len: prompt.ids.len(),
            prompt_top,
            prompt_logprobs: None,
            texts: Arc::clone(&state.token_texts),
            deferred: prompt_top.is_some(),
            continuous: settings.continuous_usage,
            content_chunks,
            prompt_ids: settings.extras.token_ids.then(|| prompt.ids.clone()),
        })
    }

    fn header(&self, object: &'static str) -> Header<'_> {
        Header {
            id: &self.id,
            object,
            created: self.created,
            model: &self.model,
        }
    }

    fn chunk(
        &self,
        buf: &mut Vec<u8>,
        choices: Vec<ChatChunkChoice>,
        usage: Option<Usage>,
        prompt_logprobs: Option<PromptLogprobs>,
    ) {
        self.chunk_with_ids(buf, choices, usage, prompt_logprobs, None);
    }

    fn chunk_with_ids(
        &self,
        buf: &mut Vec<u8>,
        choices: Vec<ChatChunkChoice>,
        usage: Option<Usage>,
        prompt_logprobs: Option<PromptLogprobs>,
        prompt_token_ids: Option<Vec<u32>>,
    ) {
        let chunk = ChatChunk {
            header: self.header("chat.completion.chunk"),
            choices,
            usage,
            prompt_logprobs,
            prompt_token_ids,
        };
        sse::push_event(buf, &chunk);
    }

    /// The usage a chunk carries before any token (with `continuous_usage_stats`).
    fn opening_usage(&self) -> Option<Usage> {
        self.continuous.then(|| {
            self.with_reasoning(Usage::new(
                u32::try_from(self.prompt_len).unwrap_or(u32::MAX),
                0,
            ))
        })
    }

    /// `usage` with every choice's reasoning tokens (when the server counts them).
    fn with_reasoning(&self, usage: Usage) -> Usage {
        ChatChoiceState::usage_of(&self.choices, usage)
    }

    /// The role chunk of each choice (the first with `prompt_logprobs`), then the echo.
    fn opening(&self, buf: &mut Vec<u8>, mut prompt_logprobs: Option<PromptLogprobs>) {
        let chunk_of = |index: usize, delta: Delta| ChatChunkChoice {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            delta,
            logprobs: None,
            finish_reason: None,
            token_ids: None,
        };
        for index in 0..self.choices.len() {
            let delta = Delta {
                role: Some("assistant"),
                content: Some(String::new()),
                ..Delta::default()
            };
            let usage = self.opening_usage();
            self.chunk_with_ids(
                buf,
                vec![chunk_of(index, delta)],
                usage,
                prompt_logprobs.take(),
                self.prompt_ids.clone(),
            );
        }
        let Some(echo) = self.echo.as_ref().filter(|e| !e.is_empty()) else {
            return;
        };
        for index in 0..self.choices.len() {
            let delta = Delta {
                content: Some(echo.clone()),
                ..Delta::default()
            };
            self.chunk(
                buf,
                vec![chunk_of(index, delta)],
                self.opening_usage(),
                None,
            );
        }
    }

    /// The `prompt_logprobs` of `piece` (the first that has the engine's), once.
    fn take_prompt_logprobs(&mut self, piece: &Piece) -> Option<PromptLogprobs> {
        let (top, entries) = (self.prompt_top?, piece.prompt_logprobs.as_ref()?);
        if self.prompt_logprobs.is_some() {
            return None;
        }
        let rendered = self.texts.prompt(self.prompt_len, entries, top);
        self.prompt_logprobs = Some(rendered.clone());
        Some(rendered)
    }
}

impl Shapes for ChatShapes {
    fn start(&mut self, buf: &mut Vec<u8>) {
        if !self.deferred {
            self.opening(buf, None);
        }
    }

    fn step(&mut self, index: usize, piece: Piece, usage: Usage, buf: &mut Vec<u8>) {
        let prompt_logprobs = self.take_prompt_logprobs(&piece);
        if std::mem::take(&mut self.deferred) {
            self.opening(buf, prompt_logprobs);
        }
        let continuous = self.continuous;
        let Some(choice) = self.choices.get_mut(index) else {
            return;
        };
        let mut delta = choice.step(piece);
        if delta.is_empty() {
            return;
        }
        let usage = usage.with_reasoning(choice.reasoning_tokens());
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        if delta.reasoning.is_empty()
            && delta.calls.is_empty()
            && delta.logprobs.is_none()
            && delta.token_ids.is_none()
            && !continuous
        {
            let chunks = &self.content_chunks;
            chunks.push(buf, index, &delta.content, delta.finish);
            return;
        }
        let chunk = ChatChunkChoice {
            index,
            delta: delta.delta(),
            logprobs: delta
                .logprobs
                .take()
                .map(|content| ChatLogprobs { content }),
            finish_reason: delta.finish,
            token_ids: delta.token_ids.take(),
        };
        self.chunk(buf, vec![chunk], continuous.then_some(usage), None);
    }

    fn absorb(&mut self, index: usize, piece: Piece) {
        self.take_prompt_logprobs(&piece);
        if let Some(choice) = self.choices.get_mut(index) {
            choice.step(piece);
        }
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        self.chunk(buf, Vec::new(), Some(self.with_reasoning(usage)), None);
    }

    fn body(self, usage: Usage) -> Vec<u8> {
        let usage = self.with_reasoning(usage);
        let mut choices: Vec<_> = self
            .choices
            .into_iter()
            .map(ChatChoiceState::choice)
            .collect();
        if let Some(echo) = &self.echo {
            for choice in &mut choices {
                let content = choice.message.content.take().unwrap_or_default();
                choice.message.content = Some(format!("{echo}{content}"));
            }
        }
        let body = ChatCompletion {
            header: Header {
                id: &self.id,
                object: "chat.completion",
                created: self.created,
                model: &self.model,
            },
            choices,
            usage,
            prompt_logprobs: self.prompt_logprobs,
            prompt_token_ids: self.prompt_ids,
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
