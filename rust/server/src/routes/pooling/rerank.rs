//! `POST /rerank`, `/v1/rerank`, `/v2/rerank` (vLLM's `RerankRequest`, Jina / Cohere
//! style): the `documents` scored against `query` as [`super::score`] scores pairs,
//! sorted by relevance (highest first, equals in input order), the first `top_n` kept
//! (0: all), each with its document unless `return_documents` is false. Mirrors the
//! rerank half of `server/routes/pooling/score.py`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;

use super::dispatch::Job;
use super::encoding::Float;
use super::{flag, request, respond, score};
use crate::edge::error::ApiError;
use crate::state::SharedState;

/// The route's own fields (with [`request::SCORING`]).
const KEYS: &[&str] = &["query", "documents", "top_n", "return_documents"];

/// vLLM's `RerankResponse`.
#[derive(Debug, Serialize)]
pub struct RerankResponse {
    pub id: String,
    pub model: String,
    pub usage: RerankUsage,
    pub results: Vec<RerankResult>,
}

#[derive(Debug, Serialize)]
pub struct RerankUsage {
    pub prompt_tokens: usize,
    pub total_tokens: usize,
}

#[derive(Debug, Serialize)]
pub struct RerankResult {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<RerankDocument>,
    pub relevance_score: Float,
}

#[derive(Debug, Serialize)]
pub struct RerankDocument {
    pub text: String,
    pub multi_modal: Option<()>,
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(reranked(&state, body).await)
}

async fn reranked(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<RerankResponse, ApiError> {
    let job = Job::accept(state, body, "score")?;
    let parsed = request::parse(state, &job.body, &[request::SCORING, KEYS])?;
    let value = &parsed.value;
    score::unsupported(value)?;
    let query = match value.get("query") {
        None | Some(Value::Null) => return Err(ApiError::bad("query", "`query` is required")),
        Some(Value::String(q)) => q.clone(),
        Some(_) => return Err(ApiError::bad("query", "`query` must be a string")),
    };
    let documents = match value.get("documents") {
        None | Some(Value::Null) => {
            return Err(ApiError::bad("documents", "`documents` is required"))
        }
        Some(documents) => score::texts(documents, "documents")?,
    };
    let top_n = match value.get("top_n") {
        None | Some(Value::Null) => 0,
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 => n,
            Some(n) => {
                return Err(ApiError::bad(
                    "top_n",
                    format!("`top_n` must be at least 0, got {n}"),
                ))
            }
            None => {
                return Err(ApiError::bad(
                    "top_n",
                    format!("invalid value for `top_n`: expected an integer, got {v}"),
                ))
            }
        },
    };
    let return_documents = flag(value, "return_documents")?.unwrap_or(true);
    let sides = (vec![query], documents.clone());
    let (scores, tokens) = score::scores(state, &job, &parsed, sides).await?;
    let mut results: Vec<RerankResult> = documents
        .into_iter()
        .zip(scores)
        .enumerate()
        .map(|(index, (text, score))| RerankResult {
            index,
            document: return_documents.then_some(RerankDocument {
                text,
                multi_modal: None,
            }),
            relevance_score: Float(score),
        })
        .collect();
    // Stable: equal scores keep their input order, as Python's sort.
    results.sort_by(|a, b| b.relevance_score.0.total_cmp(&a.relevance_score.0));
    if let Ok(n) = usize::try_from(top_n) {
        if n > 0 && n < results.len() {
            results.truncate(n);
        }
    }
    Ok(RerankResponse {
        id: job.id.clone(),
        model: state.model_name.to_string(),
        usage: RerankUsage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        },
        results,
    })
}
