//! `POST /v1/completions`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;

use crate::dispatch::{generate, AcceptedRequest};
use crate::edge::error::text_error;
use crate::edge::error::ApiError;
use crate::openai::{Completion, Header, Usage};
use crate::output::choice::{CompletionChoiceState, PromptView};
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::output::sse;
use crate::state::{AppState, SharedState};
use crate::validate::prompt;

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(&state, body, prompt::completion, CompletionShapes::new).await
}

/// Completions response shapes: one state per choice (prompt-major: choice `i * n + j`
/// is choice `j` of prompt `i`).
pub struct CompletionShapes {
    id: String,
    created: u64,
    model: Arc<str>,
    choices: Vec<CompletionChoiceState>,
    /// `stream_options.continuous_usage_stats`: usage on every chunk.
    continuous: bool,
}

impl CompletionShapes {
    pub fn new(job: &AcceptedRequest, state: &AppState) -> Result<Self, ApiError> {
        let settings = &job.prompt()?.settings;
        let top = settings.sampling.logprobs.map(|k| k as usize);
        let mut choices = Vec::with_capacity(job.prompts.len() * settings.n as usize);
        for prompt in &job.prompts {
            let echo = if settings.echo {
                Some(match &prompt.text {
                    Some(text) => text.clone(),
                    None => state
                        .tokenizer
                        .decode(&prompt.ids, settings.skip_special_tokens)
                        .map_err(text_error)?,
                })
            } else {
                None
            };
            let view = Arc::new(PromptView {
                echo,
                ids: prompt.ids.clone(),
                prompt_top: settings.prompt_logprobs.map(|k| k as usize),
                ids_as_tokens: settings.extras.ids_as_tokens,
                token_ids: settings.extras.token_ids,
            });
            for _ in 0..settings.n {
                let index = u32::try_from(choices.len()).unwrap_or(u32::MAX);
                choices.push(CompletionChoiceState::new(
                    index,
                    Arc::clone(&view),
                    top,
                    Arc::clone(&state.token_texts),
                ));
            }
        }
        Ok(Self {
            id: job.id.clone(),
            created: job.created,
            model: state.model_name(),
            choices,
            continuous: settings.continuous_usage,
        })
    }

    fn header(&self) -> Header<'_> {
        Header {
            id: &self.id,
            object: "text_completion",
            created: self.created,
            model: &self.model,
        }
    }
}

impl Shapes for CompletionShapes {
    fn start(&mut self, _buf: &mut Vec<u8>) {}

    fn step(&mut self, index: usize, piece: Piece, usage: Usage, buf: &mut Vec<u8>) {
        let Some(choice) = self.choices.get_mut(index) else {
            return;
        };
        let choice = choice.step(piece);
        sse::push_event(
            buf,
            &Completion {
                header: self.header(),
                choices: vec![choice],
                usage: self.continuous.then_some(usage),
            },
        );
    }

    fn absorb(&mut self, index: usize, piece: Piece) {
        if let Some(choice) = self.choices.get_mut(index) {
            choice.step(piece);
        }
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        sse::push_event(
            buf,
            &Completion {
                header: self.header(),
                choices: Vec::new(),
                usage: Some(usage),
            },
        );
    }

    fn body(self, usage: Usage) -> Vec<u8> {
        let body = Completion {
            header: Header {
                id: &self.id,
                object: "text_completion",
                created: self.created,
                model: &self.model,
            },
            choices: self
                .choices
                .into_iter()
                .map(CompletionChoiceState::choice)
                .collect(),
            usage: Some(usage),
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
