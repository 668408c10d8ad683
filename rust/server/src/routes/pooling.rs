//! The pooling routes (vLLM 0.33's shapes), for an engine whose READY says runner
//! "pooling": `POST /v1/embeddings` ([`embeddings`]), `POST /pooling` (here),
//! `POST /classify` ([`classify`]), `POST /score` and `/v1/score` ([`score`]), and
//! `POST /rerank`, `/v1/rerank`, `/v2/rerank` ([`rerank`]). The body and prompts: [`request`]; the engine round trip: [`job`]; the
//! floats on the wire: [`encoding`]. Which routes an engine serves (its runner and tasks)
//! is checked here, both ways. Mirrors `server/routes/pooling/`. Behaviour: docs/api.md,
//! "Pooling models".

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
use crate::validate::prompt::TextModel;

pub mod classify;
pub mod embeddings;
pub mod encoding;
pub mod job;
pub mod request;
pub mod rerank;
pub mod score;

use encoding::{Encoded, Encoding};
use job::{Job, Prompt, Scheduling};
use request::{Basic, Truncation};

/// The tasks `tasks` as a list for a message (`embed, classify`).
fn listed(tasks: &[PoolingTask]) -> String {
    let names: Vec<&str> = tasks.iter().map(|t| t.as_str()).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// A generation route on a pooling engine: a 400 that says so.
pub fn refuse_generation(state: &AppState) -> Result<(), ApiError> {
    if state.serves.runner != Runner::Pooling {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "The model `{}` is a pooling model (runner \"pooling\"; tasks: {}): it does not \
         generate text. Use /v1/embeddings, /pooling, /classify, /score or /rerank.",
        state.model_name,
        listed(&state.serves.tasks)
    )))
}

/// A pooling route on a generation engine: a 400 that says so.
pub fn serving_pooling(state: &AppState) -> Result<(), ApiError> {
    if state.serves.runner == Runner::Pooling {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "The model `{}` is a generation model (runner \"generate\"): it serves no pooling \
         route (embeddings, pooling, classify, score, rerank); serve a pooling model \
         for these.",
        state.model_name
    )))
}

/// A pooling route whose `task` the model does not serve: a 400 that says so.
pub fn require(state: &AppState, task: PoolingTask) -> Result<(), ApiError> {
    if state.serves.tasks.contains(&task) {
        return Ok(());
    }
    Err(ApiError::bad_request(format!(
        "The model `{}` does not serve the \"{}\" pooling task (its tasks: {}).",
        state.model_name,
        task.as_str(),
        listed(&state.serves.tasks)
    )))
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

/// `dimensions`: absent, or a positive integer.
pub fn dimensions(value: &Value) -> Result<Option<u64>, ApiError> {
    match value.get("dimensions") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64().filter(|&d| d > 0) {
            Some(d) => Ok(Some(d)),
            None => Err(ApiError::bad(
                "dimensions",
                format!("`dimensions` must be a positive integer, got {v}"),
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

/// The prompts of a completion- or chat-style body (`input` / `messages`), each with
/// `params`; `special`: `add_special_tokens` unless the body says (chat: off).
pub async fn prompts_of(
    state: &SharedState,
    value: &Value,
    mut basic: Basic,
    params: &PoolingParams,
) -> Result<Vec<Prompt>, ApiError> {
    let cut = Truncation::of(state, &basic)?;
    let chat = basic.messages.is_some();
    let special = basic.add_special_tokens.unwrap_or(!chat);
    let input = request::input(state, value, &mut basic)?;
    let field = if chat { "messages" } else { "input" };
    let ids = request::prompts(state, input, special, cut, field).await?;
    Ok(ids
        .into_iter()
        .map(|ids| Prompt {
            ids,
            params: params.clone(),
        })
        .collect())
}

/// `/pooling`'s own fields.
const POOLING_KEYS: &[&str] = &["task", "encoding_format", "dimensions", "use_activation"];

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
/// model's first task), as floats or base64.
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
    let job = Job::accept(state, body, "pool")?;
    let (value, basic) = request::parse(&job.body, POOLING_KEYS, true)?;
    state.check_model(basic.model.as_deref())?;
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
                format!("`task` must be \"embed\", \"classify\" or \"score\", got {s:?}"),
            )
        })?,
        Some(v) => {
            return Err(ApiError::bad(
                "task",
                format!("`task` must be a string, got {v}"),
            ))
        }
    };
    require(state, task)?;
    let encoding = Encoding::of(value.get("encoding_format"))?;
    let mut params = PoolingParams::new(task);
    let activation = flag(&value, "use_activation")?;
    match task {
        PoolingTask::Embed => {
            params.dimensions = dimensions(&value)?;
            params.normalize = activation;
        }
        _ if dimensions(&value)?.is_some() => {
            return Err(ApiError::bad(
                "dimensions",
                "`dimensions` applies to the \"embed\" task only",
            ))
        }
        _ => params.use_activation = activation,
    }
    let scheduling = Scheduling::of(state, &value)?;
    let prompts = prompts_of(state, &value, basic, &params).await?;
    let outputs = job.run(state, prompts, &scheduling).await?;
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
