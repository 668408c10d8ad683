//! The pooling routes (vLLM 0.33's shapes), for an engine whose READY says runner
//! "pooling": `POST /v1/embeddings` ([`embeddings`]), `POST /pooling` (here; Python's
//! `pooling/pooling.py`), `POST /classify` ([`classify`]), `POST /score` and `/v1/score`
//! ([`score`]), and `POST /rerank`, `/v1/rerank`, `/v2/rerank` ([`rerank`]). The body
//! and prompts: [`request`]; the engine round trip: [`dispatch`]; the answers on the
//! wire: [`encoding`]. The runner checks, both ways, are `state::Serves`'. Mirrors `server/routes/pooling/`. Behaviour: docs/api.md, "Pooling
//! routes".

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use vrs_wire::{PoolingParams, PoolingTask};

use crate::edge::error::ApiError;
use crate::state::{AppState, SharedState};

pub mod classify;
pub mod dispatch;
pub mod embeddings;
pub mod encoding;
pub mod request;
pub mod rerank;
pub mod score;

use dispatch::{Job, Prompt};
use encoding::{Encoded, Encoding};
use request::Parsed;

/// A pooling route whose `task` the model does not serve: a 400 (naming `param`, if any).
pub fn require(state: &AppState, task: PoolingTask, param: Option<&str>) -> Result<(), ApiError> {
    if state.serves.tasks.contains(&task) {
        return Ok(());
    }
    Err(ApiError::BadRequest {
        message: format!(
            "this model does not serve the `{}` task (it serves: {})",
            task.as_str(),
            state.serves.task_names()
        ),
        param: param.map(str::to_owned),
    })
}

/// vLLM's `UsageInfo` of a pooling response: prompt tokens only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Usage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
    pub completion_tokens: usize,
    pub prompt_tokens_details: Option<()>,
    pub completion_tokens_details: Option<()>,
}

impl Usage {
    pub fn of(prompt_tokens: usize) -> Self {
        Self {
            prompt_tokens,
            total_tokens: prompt_tokens,
            completion_tokens: 0,
            prompt_tokens_details: None,
            completion_tokens_details: None,
        }
    }
}

/// A JSON response of a pooling route, or its error.
pub fn respond<T: Serialize>(answer: Result<T, ApiError>) -> Response {
    match answer {
        Ok(body) => Json(body).into_response(),
        Err(err) => err.into_response(),
    }
}

/// `dimensions`: absent, or at least 1.
pub fn dimensions(value: &Value) -> Result<Option<u64>, ApiError> {
    match value.get("dimensions") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match (v.as_u64(), v.as_i64()) {
            (Some(d), _) if d > 0 => Ok(Some(d)),
            (_, Some(d)) => Err(ApiError::bad(
                "dimensions",
                format!("`dimensions` must be at least 1, got {d}"),
            )),
            _ => Err(ApiError::bad(
                "dimensions",
                format!("invalid value for `dimensions`: expected an integer, got {v}"),
            )),
        },
    }
}

/// A boolean field, absent or null: `None`.
pub fn flag(value: &Value, name: &str) -> Result<Option<bool>, ApiError> {
    match value.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ApiError::bad(
            name,
            format!("invalid value for `{name}`: expected a boolean, got {v}"),
        )),
    }
}

/// The engine requests of a prompted route: each prompt of the body with `params`.
pub async fn prompts_of(
    state: &SharedState,
    parsed: &Parsed,
    params: &PoolingParams,
) -> Result<Vec<Prompt>, ApiError> {
    let ids = request::prompts(state, parsed).await?;
    Ok(ids
        .into_iter()
        .map(|ids| Prompt {
            ids,
            params: params.clone(),
        })
        .collect())
}

/// `/pooling`'s own field (with [`request::INPUT`] and [`request::ENCODING`]).
const TASK: &[&str] = &["task"];

/// vLLM's `PoolingResponse`.
#[derive(Debug, Serialize)]
struct PoolingResponse {
    id: String,
    object: &'static str,
    created: u64,
    model: String,
    data: Vec<PoolingData>,
    usage: Usage,
}

#[derive(Debug, Serialize)]
struct PoolingData {
    index: usize,
    object: &'static str,
    data: Encoded,
}

/// `POST /pooling`: the raw pooler output of each prompt for `task` (default: the
/// model's first task), as floats or base64; ids `pooling-…` (vLLM's prefix).
pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(pooled(&state, body).await)
}

async fn pooled(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<PoolingResponse, ApiError> {
    let job = Job::accept(state, body, "pooling")?;
    let parsed = request::parse(state, &job.body, &[request::INPUT, request::ENCODING, TASK])?;
    let value = &parsed.value;
    let task = match value.get("task") {
        None | Some(Value::Null) => state
            .serves
            .tasks
            .first()
            .copied()
            .ok_or_else(|| ApiError::bad_request("this model serves no pooling task"))?,
        Some(Value::String(s)) => PoolingTask::from_wire(s).ok_or_else(|| {
            ApiError::bad(
                "task",
                format!("`task` must be one of embed, classify, score, got `{s}`"),
            )
        })?,
        Some(v) => {
            return Err(ApiError::bad(
                "task",
                format!("invalid value for `task`: expected a string, got {v}"),
            ))
        }
    };
    require(state, task, Some("task"))?;
    let encoding = Encoding::of(value)?;
    let mut params = PoolingParams::new(task);
    let activation = parsed.basic.use_activation;
    match task {
        PoolingTask::Embed => {
            params.dimensions = dimensions(value)?;
            params.normalize = activation;
        }
        _ if dimensions(value)?.is_some() => {
            return Err(ApiError::bad(
                "dimensions",
                "`dimensions` applies to the embed task only",
            ))
        }
        _ => params.use_activation = activation,
    }
    let prompts = prompts_of(state, &parsed, &params).await?;
    let scheduling = &parsed.scheduling;
    let outputs = job.run(state, prompts, scheduling).await?;
    let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
    Ok(PoolingResponse {
        id: job.id.clone(),
        object: "list",
        created: job.created,
        model: state.model_name.to_string(),
        data: outputs
            .iter()
            .enumerate()
            .map(|(index, o)| PoolingData {
                index,
                object: "pooling",
                data: encoding.encode(&o.values),
            })
            .collect(),
        usage: Usage::of(tokens),
    })
}
