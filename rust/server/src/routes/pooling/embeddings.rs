//! `POST /v1/embeddings` (vLLM's `EmbeddingCompletionRequest` / `EmbeddingChatRequest`,
//! OpenAI's shape): one embedding per prompt of `input` (or of the conversation in
//! `messages`), as floats or base64 (`encoding_format`, `embed_dtype`, `endianness`),
//! with `dimensions` (Matryoshka; the engine refuses it otherwise) and `use_activation`
//! (false: not normalized; vLLM 0.33 refuses `normalize`, which it replaced). Mirrors
//! `server/routes/pooling/embeddings.py`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use vrs_wire::{PoolingParams, PoolingTask};

use super::dispatch::Job;
use super::encoding::{Encoded, Encoding};
use super::{dimensions, prompts_of, request, require, respond, Usage};
use crate::edge::error::ApiError;
use crate::state::SharedState;

/// vLLM's `EmbeddingResponse`.
#[derive(Debug, Serialize)]
pub struct EmbeddingResponse {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub data: Vec<EmbeddingData>,
    pub usage: Usage,
}

#[derive(Debug, Serialize)]
pub struct EmbeddingData {
    pub index: usize,
    pub object: &'static str,
    pub embedding: Encoded,
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(embeddings(&state, body).await)
}

async fn embeddings(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<EmbeddingResponse, ApiError> {
    let job = Job::accept(state, body, "embd")?;
    let parsed = request::parse(state, &job.body, &[request::INPUT, request::ENCODING])?;
    require(state, PoolingTask::Embed, None)?;
    let encoding = Encoding::of(&parsed.value)?;
    let mut params = PoolingParams::new(PoolingTask::Embed);
    params.dimensions = dimensions(&parsed.value)?;
    params.normalize = parsed.basic.use_activation;
    let prompts = prompts_of(state, &parsed, &params).await?;
    let outputs = job.run(state, prompts, &parsed.scheduling).await?;
    let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
    Ok(EmbeddingResponse {
        id: job.id.clone(),
        object: "list",
        created: job.created,
        model: state.model_name.to_string(),
        data: outputs
            .iter()
            .enumerate()
            .map(|(index, o)| EmbeddingData {
                index,
                object: "embedding",
                embedding: encoding.encode(&o.values),
            })
            .collect(),
        usage: Usage::of(tokens),
    })
}
