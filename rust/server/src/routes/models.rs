//! `GET /v1/models`: the one served model (serving and render service alike).

use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::openai::{ModelCard, ModelList};
use crate::state::{RenderState, SharedState};

pub async fn models(State(state): State<SharedState>) -> Response {
    model_list(
        &state.model_name,
        state.created,
        &state.model_root,
        state.max_model_len,
    )
}

/// The `GET /v1/models` answer: the one served model.
pub fn model_list(name: &str, created: u64, root: &str, max_model_len: u64) -> Response {
    Json(ModelList {
        object: "list",
        data: [ModelCard {
            id: name,
            object: "model",
            created,
            owned_by: "vrs",
            root,
            parent: None,
            max_model_len,
        }],
    })
    .into_response()
}

pub async fn render_models(State(state): State<Arc<RenderState>>) -> Response {
    model_list(
        &state.model_name,
        state.created,
        &state.model_root,
        state.max_model_len,
    )
}
