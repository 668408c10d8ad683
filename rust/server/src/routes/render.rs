//! The render routes of the engine-less render service (template + tokenization only): the
//! serving path's own prompt builder ([`crate::validate::prompt`]) answering with what the
//! engine would receive. The service's start, limits and shutdown are in
//! [`crate::lifecycle::render`]. Mirrors `server/routes/render.py`. Behaviour: docs/api.md,
//! "Routes".

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
use crate::edge::error::Dialect;
use crate::routes::messages::request::Mode;
use crate::state::RenderState;
use crate::validate::beam_search;
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

fn answer<'a>(state: &'a RenderState, prefix: &str, prompt: Prompt) -> Rendered<'a> {
    Rendered {
        request_id: request_id(prefix),
        model: &state.model_name,
        prompt: prompt.text,
        prompt_token_ids: prompt.ids,
        sampling_params: prompt.settings.sampling,
    }
}

pub(crate) fn rendered(state: &RenderState, prefix: &str, prompt: Prompt) -> Response {
    Json(answer(state, prefix, prompt)).into_response()
}

pub async fn chat(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body_bytes(body) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    let prompt = prompt::chat(&state, body)
        .await
        .and_then(|p| beam_search::check_render(&p.settings).map(|()| p));
    match prompt {
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
    let prompts = prompt::completion(&state, body).await.and_then(|p| {
        p.first()
            .map_or(Ok(()), |first| beam_search::check_render(&first.settings))
            .map(|()| p)
    });
    match prompts {
        Ok(mut prompts) if prompts.len() == 1 => rendered(&state, "cmpl", prompts.swap_remove(0)),
        // A batch of prompts: one answer per prompt, in order.
        Ok(prompts) => Json(
            prompts
                .into_iter()
                .map(|prompt| answer(&state, "cmpl", prompt))
                .collect::<Vec<_>>(),
        )
        .into_response(),
        Err(err) => err.into_response(),
    }
}

/// `POST /v1/messages/render`: what the chat render answers for the Messages body's
/// translation (errors in Anthropic's shape).
pub async fn messages(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let rendered_messages = async {
        let body = body_bytes(body)?;
        crate::routes::messages::chat_prompt(&state, &body, Mode::Create).await
    };
    match rendered_messages.await {
        Ok(prompt) => rendered(&state, "msg", prompt),
        Err(err) => err.respond(Dialect::Anthropic),
    }
}

#[cfg(test)]
mod tests;
