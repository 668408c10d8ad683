//! `POST /invocations`, vLLM's SageMaker entry point: the body decides the endpoint
//! ([`kind`]: `messages` → chat, else `prompt` → completions), which then runs exactly as on
//! its own path. On a pooling model ([`pooling_route`]): `query` → rerank; `queries`,
//! `data_1` or `text_1` → score; `input` or `messages` → embeddings (or classify, on a
//! classifier). Mirrors `server/routes/invocations.py`. Behaviour: docs/api.md, "Routes".

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::de::IgnoredAny;
use vrs_wire::{PoolingTask, Runner};

use crate::dispatch::{generate, AcceptedRequest};
use crate::edge::error::ApiError;
use crate::openai::Usage;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::routes::chat_completions::ChatShapes;
use crate::routes::completions::CompletionShapes;
use crate::routes::pooling::{classify, embeddings, rerank, score};
use crate::state::{AppState, SharedState};
use crate::validate::params;
use crate::validate::prompt::{self, Prompt};

/// The 400 of a body that is neither request kind (vLLM's words, then what is accepted).
pub const NO_HANDLER: &str = "Cannot find suitable handler for request. Expected one of: \
     a chat completion request (with `messages`), a completion request (with `prompt`)";

/// The 400 of a body for no pooling route (vLLM's words, then what is accepted).
pub const NO_POOLING_HANDLER: &str = "Cannot find suitable handler for request. Expected one \
     of: a rerank request (with `query`), a score request (with `queries`, `data_1` or \
     `text_1`), an embedding or classification request (with `input` or `messages`)";

/// Which pooling route an `/invocations` body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolingRoute {
    Rerank,
    Score,
    Embeddings,
    Classify,
}

/// The body's top-level keys whose values are not null; a body that is not a JSON
/// object gets the endpoints' own 400.
fn given_keys(body: &[u8]) -> Result<Vec<String>, ApiError> {
    // Only the top-level keys are read; values are skipped, not built.
    match serde_json::from_slice::<HashMap<String, Option<IgnoredAny>>>(body) {
        Ok(keys) => Ok(keys
            .into_iter()
            .filter_map(|(key, value)| value.map(|_| key))
            .collect()),
        Err(_) => Err(params::parse_object(body)
            .err()
            .unwrap_or_else(|| ApiError::bad_request("the request body must be a JSON object"))),
    }
}

/// The pooling route of `body` (vLLM's order: rerank, score, then the model's embed or
/// classify task), else a 400.
pub fn pooling_route(tasks: &[PoolingTask], body: &[u8]) -> Result<PoolingRoute, ApiError> {
    let keys = given_keys(body)?;
    let given = |key: &str| keys.iter().any(|k| k == key);
    if given("query") {
        Ok(PoolingRoute::Rerank)
    } else if ["queries", "data_1", "text_1"].into_iter().any(given) {
        Ok(PoolingRoute::Score)
    } else if given("input") || given("messages") {
        Ok(if tasks.contains(&PoolingTask::Embed) {
            PoolingRoute::Embeddings
        } else {
            PoolingRoute::Classify
        })
    } else {
        Err(ApiError::bad_request(NO_POOLING_HANDLER))
    }
}

/// Which endpoint an `/invocations` body is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Chat,
    Completion,
}

/// The endpoint of `body`: `messages` (not null) → chat, else `prompt` (not null) →
/// completion, else a 400. A body that is not a JSON object gets the endpoints' own 400.
pub fn kind(body: &[u8]) -> Result<Kind, ApiError> {
    let keys = given_keys(body)?;
    let given = |key: &str| keys.iter().any(|k| k == key);
    if given("messages") {
        Ok(Kind::Chat)
    } else if given("prompt") {
        Ok(Kind::Completion)
    } else {
        Err(ApiError::bad_request(NO_HANDLER))
    }
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if state.serves.runner == Runner::Pooling {
        return pooling(state, body).await;
    }
    generate(&state, body, build, InvocationShapes::new).await
}

/// A pooling body, on the route its keys choose.
async fn pooling(state: SharedState, body: Result<Bytes, BytesRejection>) -> Response {
    let route = match &body {
        Ok(bytes) => pooling_route(&state.serves.tasks, bytes),
        Err(_) => Ok(PoolingRoute::Embeddings), // the route answers the body's own error
    };
    match route {
        Ok(PoolingRoute::Rerank) => rerank::handle(State(state), body).await,
        Ok(PoolingRoute::Score) => score::handle(State(state), body).await,
        Ok(PoolingRoute::Embeddings) => embeddings::handle(State(state), body).await,
        Ok(PoolingRoute::Classify) => classify::handle(State(state), body).await,
        Err(error) => error.into_response(),
    }
}

async fn build(state: &SharedState, body: Bytes) -> Result<Vec<Prompt>, ApiError> {
    match kind(&body)? {
        Kind::Chat => prompt::chat(state, body).await.map(|p| vec![p]),
        Kind::Completion => prompt::completion(state, body).await,
    }
}

/// The response shapes of the endpoint the body chose.
pub enum InvocationShapes {
    Chat(ChatShapes),
    Completion(CompletionShapes),
}

impl InvocationShapes {
    fn new(job: &AcceptedRequest, state: &AppState) -> Result<Self, ApiError> {
        match job.prompt()?.chat {
            Some(_) => ChatShapes::new(job, state).map(Self::Chat),
            None => CompletionShapes::new(job, state).map(Self::Completion),
        }
    }
}

impl Shapes for InvocationShapes {
    fn start(&mut self, buf: &mut Vec<u8>) {
        match self {
            Self::Chat(s) => s.start(buf),
            Self::Completion(s) => s.start(buf),
        }
    }

    fn step(&mut self, index: usize, piece: Piece, usage: Usage, buf: &mut Vec<u8>) {
        match self {
            Self::Chat(s) => s.step(index, piece, usage, buf),
            Self::Completion(s) => s.step(index, piece, usage, buf),
        }
    }

    fn absorb(&mut self, index: usize, piece: Piece) {
        match self {
            Self::Chat(s) => s.absorb(index, piece),
            Self::Completion(s) => s.absorb(index, piece),
        }
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        match self {
            Self::Chat(s) => s.usage(buf, usage),
            Self::Completion(s) => s.usage(buf, usage),
        }
    }

    fn body(self, usage: Usage) -> Vec<u8> {
        match self {
            Self::Chat(s) => s.body(usage),
            Self::Completion(s) => s.body(usage),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(body: &str) -> String {
        kind(body.as_bytes()).unwrap_err().to_string()
    }

    #[test]
    fn the_body_picks_the_endpoint() {
        assert_eq!(kind(br#"{"messages": []}"#).unwrap(), Kind::Chat);
        assert_eq!(
            kind(br#"{"prompt": "x", "n": 2}"#).unwrap(),
            Kind::Completion
        );
        // Chat first, as vLLM tries ChatCompletionRequest before CompletionRequest.
        let both = br#"{"prompt": "x", "messages": [{"role": "user"}]}"#;
        assert_eq!(kind(both).unwrap(), Kind::Chat);
        // A null field is an absent one.
        assert_eq!(
            kind(br#"{"messages": null, "prompt": [1, 2]}"#).unwrap(),
            Kind::Completion
        );
        // Nested keys do not count.
        assert_eq!(error_of(r#"{"x": {"messages": []}}"#), NO_HANDLER);
        assert_eq!(error_of(r#"{"model": "m", "messages": null}"#), NO_HANDLER);
        // Values are skipped unchecked (as in server/routes/invocations.py): the endpoint reports them.
        assert_eq!(error_of(r#"{"a": 1e400}"#), NO_HANDLER);
    }

    #[test]
    fn a_body_that_is_no_object_gets_the_endpoints_errors() {
        assert!(error_of("  ").contains("empty"));
        assert!(error_of(r#"{"messages": ["#).contains("invalid JSON"));
        assert_eq!(error_of("[1, 2]"), "the request body must be a JSON object");
        assert_eq!(error_of("null"), "the request body must be a JSON object");
        let err = kind(b"{}").unwrap_err();
        assert_eq!(err.status(), axum::http::StatusCode::BAD_REQUEST);
        assert!(err.to_string().contains("`messages`") && err.to_string().contains("`prompt`"));
    }
}
