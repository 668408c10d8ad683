//! `POST /v1/embeddings` (vLLM's `EmbeddingCompletionRequest` / `EmbeddingChatRequest`,
//! OpenAI's shape): one embedding per prompt of `input` (or of the conversation in
//! `messages`), as floats or base64 (`encoding_format`), `dimensions` (Matryoshka) and
//! `normalize` / `use_activation` passed to the engine.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use vrs_wire::{PoolingParams, PoolingTask};

use super::encoding::{Encoded, Encoding};
use super::job::{Job, Scheduling};
use super::{dimensions, flag, prompts_of, request, require, respond, Usage};
use crate::edge::error::ApiError;
use crate::state::SharedState;
use crate::validate::prompt::TextModel;

/// The route's own fields.
const KEYS: &[&str] = &[
    "encoding_format",
    "dimensions",
    "normalize",
    "use_activation",
];

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
    let (value, basic) = request::parse(&job.body, KEYS, true)?;
    state.check_model(basic.model.as_deref())?;
    require(state, PoolingTask::Embed)?;
    let encoding = Encoding::of(value.get("encoding_format"))?;
    let mut params = PoolingParams::new(PoolingTask::Embed);
    params.dimensions = dimensions(&value)?;
    let normalize = flag(&value, "normalize")?;
    let activation = flag(&value, "use_activation")?;
    if let (Some(n), Some(a)) = (normalize, activation) {
        if n != a {
            return Err(ApiError::bad(
                "normalize",
                "`normalize` and `use_activation` disagree; give one of them",
            ));
        }
    }
    params.normalize = normalize.or(activation);
    let scheduling = Scheduling::of(state, &value)?;
    let prompts = prompts_of(state, &value, basic, &params).await?;
    let outputs = job.run(state, prompts, &scheduling).await?;
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
