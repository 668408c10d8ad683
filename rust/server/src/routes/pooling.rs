//! The pooling routes (vLLM 0.33's shapes), for an engine whose READY says runner
//! "pooling": `POST /v1/embeddings` ([`embeddings`]), `POST /pooling` (here; Python's
//! `pooling/pooling.py`), `POST /classify` ([`classify`]), `POST /score` and `/v1/score`
//! ([`score`]), and `POST /rerank`, `/v1/rerank`, `/v2/rerank` ([`rerank`]). The body
//! and prompts: [`request`]; the engine round trip: [`dispatch`]; the answers on the
//! wire: [`encoding`]. Which routes an engine serves (its runner and tasks) is checked
//! here, both ways. Mirrors `server/routes/pooling/`. Behaviour: docs/api.md, "Pooling
//! routes".

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use vrs_wire::{PoolingParams, PoolingTask, Runner};

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

/// The routes of each pooling task, for the 400 of a generation request.
fn task_routes(task: PoolingTask) -> &'static [&'static str] {
    match task {
        PoolingTask::Embed => &["/v1/embeddings", "/pooling", "/score", "/rerank"],
        PoolingTask::Classify => &["/classify", "/pooling"],
        PoolingTask::Score => &["/score", "/rerank"],
    }
}

fn tasks_of(state: &AppState) -> String {
    let names: Vec<&str> = state.serves.tasks.iter().map(|t| t.as_str()).collect();
    names.join(", ")
}

/// A generation route on a pooling engine: a 400 that says so.
pub fn refuse_generation(state: &AppState) -> Result<(), ApiError> {
    if state.serves.runner != Runner::Pooling {
        return Ok(());
    }
    let mut routes: Vec<&str> = state
        .serves
        .tasks
        .iter()
        .flat_map(|&t| task_routes(t).iter().copied())
        .collect();
    routes.sort_unstable();
    routes.dedup();
    Err(ApiError::bad_request(format!(
        "this model serves pooling requests: {} (use {}); it does not generate text",
        tasks_of(state),
        routes.join(", ")
    )))
}

/// A pooling route on a generation engine: a 400 that says so.
pub fn serving_pooling(state: &AppState) -> Result<(), ApiError> {
    if state.serves.runner == Runner::Pooling {
        return Ok(());
    }
    Err(ApiError::bad_request(
        "this model generates text: it does not serve pooling requests (embeddings, \
         classify, score, rerank); use /v1/chat/completions, /v1/completions, /v1/responses \
         or /v1/messages",
    ))
}

/// A pooling route whose `task` the model does not serve: a 400 (naming `param`, if any).
pub fn require(state: &AppState, task: PoolingTask, param: Option<&str>) -> Result<(), ApiError> {
    if state.serves.tasks.contains(&task) {
        return Ok(());
    }
    Err(ApiError::BadRequest {
        message: format!(
            "this model does not serve the `{}` task (it serves: {})",
            task.as_str(),
            tasks_of(state)
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
