//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API as a
//! translation at the edge of the chat pipeline. The body becomes the equivalent chat request
//! ([`request`]), served by the chat path; the one chat choice's deltas become content blocks
//! and Messages events ([`events`]); every error is in Anthropic's shape
//! ([`Dialect::Anthropic`]). Mirrors `server/routes/messages/__init__.py`.
//! Behaviour: docs/api.md, "Anthropic Messages API".

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;
use serde_json::{Map, Value};

use crate::dispatch::{generate_as, AcceptedRequest};
use crate::edge::body::request_body;
use crate::edge::error::{ApiError, Dialect};
use crate::openai::Usage;
use crate::output::choice::ChatChoiceState;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::state::{AppState, SharedState};
use crate::validate::prompt::{self, Prompt, TextModel};

mod blocks;
mod config;
pub mod events;
mod json;
pub mod request;
mod wire;

use events::Message;
use request::Mode;

/// The chat request equivalent to a Messages `body`, for the chat prompt builder.
pub fn chat_body(
    model: &impl TextModel,
    body: &[u8],
    mode: Mode,
) -> Result<Map<String, Value>, ApiError> {
    let server = request::Server {
        reasoning: model.reasoning_parser().is_some(),
        merge_system: model.template().map_or(true, |t| t.merges_inline_system()),
    };
    match request::translate(body, mode, server)? {
        Value::Object(chat) => Ok(chat),
        _ => Err(ApiError::Internal(
            "the translated chat request is not an object".into(),
        )),
    }
}

/// The chat prompt of a Messages `body`: its errors name the Messages fields
/// ([`request::messages_param`]), and so does the 400 of an engine that refuses its
/// structured-output spec (the constraint's name).
pub async fn chat_prompt<S: TextModel>(
    state: &Arc<S>,
    body: &[u8],
    mode: Mode,
) -> Result<Prompt, ApiError> {
    let chat = chat_body(state.as_ref(), body, mode)?;
    let mut prompt = prompt::chat_object(state, chat, body.len())
        .await
        .map_err(request::renamed)?;
    prompt.settings.constraint = prompt.settings.constraint.map(request::messages_field);
    Ok(prompt)
}

/// `POST /v1/messages`.
pub async fn create(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let build = |state: &SharedState, body: Bytes| {
        let state = Arc::clone(state);
        async move {
            chat_prompt(&state, &body, Mode::Create)
                .await
                .map(|p| vec![p])
        }
    };
    generate_as(
        &state,
        body,
        build,
        MessageShapes::new,
        Dialect::Anthropic,
        Some("msg"),
    )
    .await
}

/// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, the rendered prompt's token
/// count (nothing generated; not under the admission limit).
pub async fn count_tokens(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match count(&state, body).await {
        Ok(n) => Json(json!({ "input_tokens": n })).into_response(),
        Err(err) => err.respond(Dialect::Anthropic),
    }
}

async fn count(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<usize, ApiError> {
    let body = request_body(body, state.options.max_request_body)?;
    Ok(chat_prompt(state, &body, Mode::CountTokens)
        .await?
        .ids
        .len())
}

/// The Messages response of one chat choice (`n` is 1).
pub struct MessageShapes {
    message: Message,
}

impl MessageShapes {
    pub fn new(job: &AcceptedRequest, state: &AppState) -> Result<Self, ApiError> {
        let prompt = job.prompt()?;
        let chat = prompt
            .chat
            .as_ref()
            .ok_or_else(|| ApiError::Internal("a messages request without a chat".into()))?;
        let reasoning = state
            .options
            .reasoning_parser
            .and_then(crate::parsers::reasoning::markers_of);
        let choice = ChatChoiceState::new(0, chat, reasoning, None, Arc::clone(&state.token_texts));
        let input_tokens = u32::try_from(prompt.ids.len()).unwrap_or(u32::MAX);
        let id = format!("msg_{}", job.hex());
        Ok(Self {
            message: Message::new(id, state.model_name(), input_tokens, choice),
        })
    }
}

impl Shapes for MessageShapes {
    fn start(&mut self, buf: &mut Vec<u8>) {
        self.message.open(buf);
    }

    fn step(&mut self, _index: usize, piece: Piece, _usage: Usage, buf: &mut Vec<u8>) {
        self.message.piece(piece, Some(buf));
    }

    fn absorb(&mut self, _index: usize, piece: Piece) {
        self.message.piece(piece, None);
    }

    /// Messages streams carry their usage in `message_delta` (see [`Shapes::finish`]).
    fn usage(&self, _buf: &mut Vec<u8>, _usage: Usage) {}

    fn body(self, usage: Usage) -> Vec<u8> {
        self.message.body(usage)
    }

    fn dialect(&self) -> Dialect {
        Dialect::Anthropic
    }

    fn finish(&mut self, buf: &mut Vec<u8>, usage: Usage, _include_usage: bool) {
        self.message.close(buf, usage);
    }

    /// `event: error` with Anthropic's error body; the stream ends there.
    fn failure(&mut self, buf: &mut Vec<u8>, err: &ApiError) {
        buf.extend_from_slice(b"event: error\ndata: ");
        buf.extend_from_slice(&err.to_json_in(Dialect::Anthropic));
        buf.extend_from_slice(b"\n\n");
    }
}

#[cfg(test)]
mod tests;
