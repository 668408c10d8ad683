//! `POST /v1/responses` (stateless): the body translated into a chat request ([`request`],
//! [`input`]) that the chat path serves; its one choice shaped as output items and typed
//! events ([`events`]). The stored-response routes answer 404 ([`not_stored`]). Mirrors
//! `server/routes/responses/__init__.py`. Behaviour: docs/api.md, "Responses API".

use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use crate::dispatch::{generate_as, AcceptedRequest};
use crate::edge::body::body_bytes;
use crate::edge::error::{ApiError, Dialect};
use crate::openai::Usage;
use crate::output::choice::ChatChoiceState;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::state::{AppState, RenderState, SharedState};
use crate::validate::prompt::{self, Prompt, TextModel};

pub mod events;
pub mod fields;
pub mod input;
pub mod request;
mod wire;

use events::ResponseEvents;
use request::Echo;

/// The chat prompt of a Responses body (and its echo, into `echo`); the chat path's
/// errors name the Responses fields ([`fields::responses_param`]), and so does the 400 of
/// an engine that refuses its structured-output spec (the constraint's name).
async fn chat_prompt<S: TextModel>(
    state: &Arc<S>,
    body: Bytes,
    echo: &OnceLock<Echo>,
) -> Result<Prompt, ApiError> {
    let translated = request::translate(&body)?;
    let _ = echo.set(translated.echo);
    let mut prompt = prompt::chat_object(state, translated.chat, body.len())
        .await
        .map_err(fields::renamed)?;
    prompt.settings.constraint = prompt.settings.constraint.map(fields::responses_field);
    Ok(prompt)
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let echo = OnceLock::new();
    let echoed = &echo;
    let build =
        |state, body| async move { chat_prompt(state, body, echoed).await.map(|p| vec![p]) };
    let shapes = |job: &AcceptedRequest, state: &AppState| ResponseShapes::new(job, state, &echo);
    generate_as(&state, body, build, shapes, Dialect::OpenAi, Some("resp")).await
}

/// `POST /v1/responses/render`: the translated chat request's render.
pub async fn render(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body_bytes(body) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    match chat_prompt(&state, body, &OnceLock::new()).await {
        Ok(prompt) => super::render::rendered(&state, "resp", prompt),
        Err(err) => err.into_response(),
    }
}

/// A stored response's routes: nothing is stored.
pub async fn not_stored(Path(id): Path<String>) -> ApiError {
    ApiError::NotFound(format!(
        "Response '{id}' not found: this server is stateless (store is not supported)"
    ))
}

/// The response's shapes: [`ResponseEvents`] over the one chat choice.
pub struct ResponseShapes(ResponseEvents);

impl ResponseShapes {
    fn new(
        job: &AcceptedRequest,
        state: &AppState,
        echo: &OnceLock<Echo>,
    ) -> Result<Self, ApiError> {
        let missing = || ApiError::Internal("a responses request without its chat".into());
        let chat = job.prompt()?.chat.as_ref().ok_or_else(missing)?;
        let echo = echo.get().cloned().ok_or_else(missing)?;
        let reasoning = state
            .options
            .reasoning_parser
            .and_then(crate::parsers::reasoning::markers_of);
        let texts = Arc::clone(&state.token_texts);
        let choice = ChatChoiceState::new(0, chat, reasoning, None, texts);
        Ok(Self(ResponseEvents::new(
            job.hex(),
            job.created,
            state.model_name(),
            echo,
            choice,
        )))
    }
}

impl Shapes for ResponseShapes {
    fn start(&mut self, buf: &mut Vec<u8>) {
        self.0.start(buf);
    }

    fn step(&mut self, _index: usize, piece: Piece, _usage: Usage, buf: &mut Vec<u8>) {
        self.0.step(piece, Some(buf));
    }

    fn absorb(&mut self, _index: usize, piece: Piece) {
        self.0.step(piece, None);
    }

    fn usage(&self, _buf: &mut Vec<u8>, _usage: Usage) {}

    fn finish(&mut self, buf: &mut Vec<u8>, usage: Usage, _include_usage: bool) {
        self.0.finish(buf, usage);
    }

    fn failure(&mut self, buf: &mut Vec<u8>, err: &ApiError) {
        self.0.failure(buf, err);
    }

    fn body(self, usage: Usage) -> Vec<u8> {
        self.0.body(usage)
    }
}

#[cfg(test)]
mod tests;
