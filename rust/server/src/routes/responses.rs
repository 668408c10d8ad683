//! `POST /v1/responses`: the body translated into a chat request ([`request`], [`input`])
//! that the chat path serves; its one choice shaped as output items and typed events
//! ([`events`]); with `--enable-responses-store` the responses kept ([`store`]) and the
//! stored-response routes and background runs ([`stored`]). Mirrors
//! `server/routes/responses/__init__.py`. Behaviour: docs/api.md, "Responses API".

use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::dispatch::{accept, AcceptedRequest};
use crate::edge::body::body_bytes;
use crate::edge::error::{ApiError, Dialect};
use crate::openai::Usage;
use crate::output::choice::ChatChoiceState;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::state::{AppState, RenderState, SharedState};
use crate::validate::prompt::{self, Prompt, TextModel};

pub mod events;
mod extras;
pub mod fields;
pub mod input;
mod item;
pub mod request;
pub mod store;
pub mod stored;
mod wire;

use events::ResponseEvents;
use request::Echo;
use store::{Cell, Entry, Stateful};
use stored::Stored;

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
    checked_prompt(state, translated.chat, body.len()).await
}

async fn checked_prompt<S: TextModel>(
    state: &Arc<S>,
    chat: serde_json::Map<String, Value>,
    size: usize,
) -> Result<Prompt, ApiError> {
    let mut prompt = prompt::chat_object(state, chat, size)
        .await
        .map_err(fields::renamed)?;
    prompt.settings.constraint = prompt.settings.constraint.map(fields::responses_field);
    Ok(prompt)
}

/// What a request keeps: its store entry (chat messages, input items) before its object.
struct Request {
    echo: Echo,
    asked: Stateful,
    kept: Option<Arc<Cell>>,
    stream: bool,
}

/// A Responses body's prompt, with the store: its stateful fields checked, the history it
/// continues spliced in, its entry (when kept) made.
async fn stateful_prompt(
    state: &SharedState,
    store: &store::ResponseStore,
    body: Bytes,
    out: &OnceLock<Request>,
) -> Result<Prompt, ApiError> {
    let asked = store::stateful(&body, store);
    let calls = store::known_calls(asked.previous.as_ref());
    let mut translated = request::translate_continuing(&body, &calls)?;
    store::check(&asked, store)?;
    let instructions = !translated.echo.instructions.is_null();
    let stream = translated.chat.get("stream") == Some(&Value::Bool(true));
    if let Some(Value::Array(messages)) = translated.chat.get_mut("messages") {
        store::continued(messages, instructions, asked.previous.as_ref());
    }
    let kept = asked.keep.then(|| {
        let messages = match translated.chat.get("messages") {
            Some(Value::Array(messages)) => messages.clone(),
            _ => Vec::new(),
        };
        let raw: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Cell::new(Entry::new(
            Value::Null,
            messages,
            store::input_items(raw.get("input")),
        ))
    });
    let echo = translated.echo.clone();
    let prompt = checked_prompt(state, translated.chat, body.len()).await?;
    let _ = out.set(Request {
        echo,
        asked,
        kept,
        stream,
    });
    Ok(prompt)
}

pub async fn handle(
    State((state, store)): State<Stored>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let request = OnceLock::new();
    let (asked, store_ref) = (&request, &*store);
    let build = |state, body| async move {
        stateful_prompt(state, store_ref, body, asked)
            .await
            .map(|p| vec![p])
    };
    let job = match accept(&state, body, build, Some("resp")).await {
        Ok(job) => job,
        Err(err) => return err.respond(Dialect::OpenAi),
    };
    let Some(request) = request.into_inner() else {
        return ApiError::Internal("a responses request without its body".into()).into_response();
    };
    let echo = OnceLock::from(request.echo);
    let mut shapes = match ResponseShapes::new(&job, &state, &echo) {
        Ok(shapes) => shapes,
        Err(err) => return err.into_response(),
    };
    shapes.0.store = request.asked.keep;
    shapes.0.previous_response_id = request.asked.previous_id.clone();
    match request.kept {
        Some(cell) if request.asked.background => stored::start_background(
            Arc::clone(&state),
            &store,
            job,
            shapes,
            cell,
            request.stream,
        ),
        Some(cell) => {
            let id = shapes.id().to_owned();
            shapes.keep(Box::new(move |last| {
                cell.lock().response = last;
                store.put(&id, cell);
            }));
            job.respond(&state, shapes).await
        }
        None => job.respond(&state, shapes).await,
    }
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

/// Who keeps a response's final object (with the store).
pub type Keep = Box<dyn FnOnce(Value) + Send>;

/// The response's shapes: [`ResponseEvents`] over the one chat choice, and who keeps its
/// final object.
pub struct ResponseShapes(ResponseEvents, Option<Keep>);

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
        let top = job.prompt()?.settings.sampling.logprobs.map(|k| k as usize);
        let choice = ChatChoiceState::new(0, chat, reasoning, top, texts);
        let prompt = job.prompt()?;
        let events = ResponseEvents::new(
            job.hex(),
            job.created,
            state.model_name(),
            echo,
            choice,
            (prompt.text.as_deref(), &prompt.ids),
        );
        Ok(Self(events, None))
    }

    /// The response id (`resp_<hex>`, or the request's `request_id`).
    pub fn id(&self) -> &str {
        self.0.id()
    }

    /// The response object ([`ResponseEvents::object`]).
    pub fn object(&self, status: Option<&'static str>, usage: Option<Usage>) -> Value {
        self.0.object(status, usage)
    }

    /// `keep` gets the final object.
    pub fn keep(&mut self, keep: Keep) {
        self.1 = Some(keep);
    }

    fn kept(&mut self, usage: Usage) {
        if let Some(keep) = self.1.take() {
            keep(self.0.object(None, Some(usage)));
        }
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
        self.kept(usage);
    }

    fn failure(&mut self, buf: &mut Vec<u8>, err: &ApiError) {
        self.0.failure(buf, err);
    }

    fn body(mut self, usage: Usage) -> Vec<u8> {
        self.kept(usage);
        self.0.body(usage)
    }
}

#[cfg(test)]
mod tests;
