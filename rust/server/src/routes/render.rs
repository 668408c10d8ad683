//! The render routes of the engine-less render service (template + tokenization only).
//!
//! Needs only the model's tokenizer and config files. Routes (same shapes and errors as
//! `server/render.py`): `POST /v1/chat/completions/render` and
//! `POST /v1/completions/render` run the serving path's own prompt builder
//! ([`crate::validate::prompt`]) and answer with what the engine would receive (`request_id`,
//! `model`, `prompt`, `prompt_token_ids`, `sampling_params` with the wire's field names);
//! chat requests may carry `tools` (rendered by the template) with `tool_choice` `none`
//! or `auto`. `GET /v1/models`, `GET /health`.
//!
//! The service's start, limits and shutdown are in [`crate::lifecycle::render`].

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use vrs_wire::SamplingParams;

use crate::dispatch::request_id;
use crate::edge::body::body_bytes;
use crate::edge::error::ApiError;
use crate::state::RenderState;
use crate::validate::prompt::{self, Prompt};

/// The answer of a render route.
#[derive(Serialize)]
struct Rendered<'a> {
    request_id: String,
    model: &'a str,
    prompt: Option<String>,
    prompt_token_ids: Vec<u32>,
    sampling_params: SamplingParams,
}

fn rendered(state: &RenderState, prefix: &str, prompt: Prompt) -> Response {
    Json(Rendered {
        request_id: request_id(prefix),
        model: &state.model_name,
        prompt: prompt.text,
        prompt_token_ids: prompt.ids,
        sampling_params: prompt.settings.sampling,
    })
    .into_response()
}

pub async fn chat(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body_bytes(body) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    match prompt::chat(&state, body).await {
        Ok(prompt) => rendered(&state, "chatcmpl", prompt),
        Err(err) => err.into_response(),
    }
}

pub async fn completion(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body_bytes(body) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    match prompt::completion(&state, body).await.and_then(single) {
        Ok(prompt) => rendered(&state, "cmpl", prompt),
        Err(err) => err.into_response(),
    }
}

/// The render service renders one prompt per request.
fn single(mut prompts: Vec<Prompt>) -> Result<Prompt, ApiError> {
    match prompts.len() {
        1 => Ok(prompts.swap_remove(0)),
        n => Err(ApiError::bad(
            "prompt",
            format!(
                "the render service renders one prompt per request; `prompt` holds {n} \
                 (send one request per prompt)"
            ),
        )),
    }
}

#[cfg(test)]
mod tests;
