//! `POST /v1/chat/completions`, and loading the model's text assets.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use vrs_text::{ChatTemplate, TextError, Tokenizer};

use crate::admission::Permit;
use crate::choice::ChatChoiceState;
use crate::error::ApiError;
use crate::job::{self, Job};
use crate::logprobs::ChatLogprobs;
use crate::openai::{ChatChunk, ChatChunkChoice, ChatCompletion, Delta, Header, Usage};
use crate::prompt::{self, Prompt};
use crate::response::Shapes;
use crate::server::{request_body, AppState, SharedState};
use crate::sse;
use crate::stream::Piece;

/// The compiled chat template (absent when the model has none).
pub type Template = ChatTemplate;

/// Loads the tokenizer and the chat template (from `override_path` when given).
pub fn load_text(
    dir: &Path,
    override_path: Option<&str>,
) -> Result<(Tokenizer, Option<Template>), String> {
    let tokenizer =
        Tokenizer::from_dir(dir).map_err(|e| format!("cannot load the tokenizer: {e}"))?;
    match tokenizer.fast_encoder() {
        Ok(()) => tracing::info!("tokenizer: fast byte-level BPE encoder"),
        Err(why) => tracing::info!("tokenizer: the tokenizers pipeline ({why})"),
    }
    match ChatTemplate::from_config(tokenizer.config(), override_path.map(Path::new)) {
        Ok(template) => Ok((tokenizer, Some(template))),
        Err(TextError::NoChatTemplate(message)) => {
            tracing::warn!("{message}");
            Ok((tokenizer, None))
        }
        Err(e) => Err(format!("cannot load the chat template: {e}")),
    }
}

/// Maps a text-layer error: the user's input or template → 400, anything else → 500.
pub fn text_error(err: TextError) -> ApiError {
    if err.is_user_error() {
        ApiError::bad_request(err.to_string())
    } else {
        ApiError::Internal(err.to_string())
    }
}

/// The chat template's source (`override_path` when given), for `--tool-call-parser
/// auto`.
pub fn template_source(tokenizer: &Tokenizer, override_path: Option<&str>) -> Option<String> {
    match override_path {
        Some(path) => std::fs::read_to_string(path).ok(),
        None => tokenizer
            .config()
            .chat_template("default")
            .map(str::to_owned),
    }
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(&state, body, "chatcmpl", prompt::chat, |job, state| {
        Ok(ChatShapes::new(job, state))
    })
    .await
}

/// A generation request (chat or completions) from arrival to answer: a slot under the
/// concurrency limit, the body under the size limit, the prompt `build` makes of it, then
/// the engine's answer in the `shapes` made for the job (ids `ID_PREFIX-…`).
pub async fn generate<'a, P, S>(
    state: &'a SharedState,
    body: Result<Bytes, BytesRejection>,
    id_prefix: &str,
    build: impl FnOnce(&'a SharedState, Bytes) -> P,
    shapes: impl FnOnce(&Job, &AppState) -> Result<S, ApiError>,
) -> Response
where
    P: Future<Output = Result<Prompt, ApiError>>,
    S: Shapes,
{
    let arrival = Instant::now();
    let job = match prepare(state, body, build).await {
        Ok((prompt, permit)) => Job::new(prompt, id_prefix, arrival, permit),
        Err(err) => return err.into_response(),
    };
    match shapes(&job, state) {
        Ok(shapes) => job.respond(state, shapes).await,
        Err(err) => err.into_response(),
    }
}

async fn prepare<'a, P>(
    state: &'a SharedState,
    body: Result<Bytes, BytesRejection>,
    build: impl FnOnce(&'a SharedState, Bytes) -> P,
) -> Result<(Prompt, Permit), ApiError>
where
    P: Future<Output = Result<Prompt, ApiError>>,
{
    let permit = state.admission.enter()?;
    let body = request_body(body, state.options.max_request_body)?;
    Ok((build(state, body).await?, permit))
}

/// Chat response shapes: one state per choice.
pub struct ChatShapes {
    id: String,
    created: u64,
    model: Arc<str>,
    choices: Vec<ChatChoiceState>,
}

impl ChatShapes {
    fn new(job: &Job, state: &AppState) -> Self {
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
            model: job::model_name(state),
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
