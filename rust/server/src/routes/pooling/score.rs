//! `POST /score` and `/v1/score` (vLLM's `ScoreRequest`s): the relevance of text pairs,
//! the two sides under any of vLLM's names (`queries` / `documents`, `queries` / `items`,
//! `data_1` / `data_2`, `text_1` / `text_2`), each a string or a list of strings, paired
//! 1:1, 1:N or N:N. On a model that serves the "score" task (a cross-encoder) each pair
//! is tokenized together (the tokenizer's pair encoding) and sent with
//! `token_type_start`, where the second text's tokens begin; on an embedding model every
//! text is embedded and a pair's score is the cosine similarity of its two embeddings.
//! The rerank routes score the same way ([`super::rerank`]). Mirrors
//! `server/routes/pooling/score.py`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use vrs_wire::{PoolingParams, PoolingTask};

use super::dispatch::{Job, Prompt};
use super::encoding::Float;
use super::request::{self, Parsed};
use super::{require, respond, Usage};
use crate::edge::error::{text_error, ApiError};
use crate::state::SharedState;
use crate::text::offload;

/// /score's sides, under each of vLLM's pairs of names (the first pair given is used).
const SIDES: [(&str, &str); 4] = [
    ("queries", "documents"),
    ("queries", "items"),
    ("data_1", "data_2"),
    ("text_1", "text_2"),
];
const SIDE_KEYS: &[&str] = &[
    "queries",
    "documents",
    "items",
    "data_1",
    "data_2",
    "text_1",
    "text_2",
];

/// One side: a string or a non-empty list of strings (`name` names it).
pub fn texts(value: &Value, name: &str) -> Result<Vec<String>, ApiError> {
    match value {
        Value::String(s) => return Ok(vec![s.clone()]),
        Value::Array(items) if items.is_empty() => {
            return Err(ApiError::bad(
                name,
                format!("At least one text element must be given (`{name}` is empty)"),
            ))
        }
        Value::Array(items) => {
            if let Some(texts) = items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect()
            {
                return Ok(texts);
            }
        }
        _ => {}
    }
    let multimodal = value.is_object()
        || value
            .as_array()
            .is_some_and(|items| items.iter().any(Value::is_object));
    Err(ApiError::bad(
        name,
        if multimodal {
            format!("`{name}`: multi-modal score inputs are not supported; send text")
        } else {
            format!("`{name}` must be a string or a list of strings")
        },
    ))
}

/// The scoring fields this server does not implement: a 400, not an unapplied field.
pub fn unsupported(value: &Value) -> Result<(), ApiError> {
    for name in ["max_tokens_per_query", "max_tokens_per_doc"] {
        if value
            .get(name)
            .is_some_and(|v| !v.is_null() && v.as_i64() != Some(0))
        {
            return Err(ApiError::bad(
                name,
                format!("`{name}` is not supported by this server; send 0 or leave it out"),
            ));
        }
    }
    for name in ["instruction", "chat_template_kwargs"] {
        if value.get(name).is_some_and(|v| !v.is_null()) {
            return Err(ApiError::bad(
                name,
                format!(
                    "`{name}` is not supported by this server (it applies to score templates, \
                     which it does not render)"
                ),
            ));
        }
    }
    Ok(())
}

/// /score's two sides, checked to pair 1:1, 1:N or N:N.
fn sides(value: &Value) -> Result<(Vec<String>, Vec<String>), ApiError> {
    let given = |k: &str| value.get(k).filter(|v| !v.is_null());
    let Some((first, second)) = SIDES
        .iter()
        .find(|(a, b)| given(a).is_some() || given(b).is_some())
    else {
        return Err(ApiError::bad(
            "queries",
            "send the texts to score as `queries` and `documents` (or `text_1` and `text_2`)",
        ));
    };
    let side = |name: &str| {
        given(name).ok_or_else(|| ApiError::bad(name, format!("`{name}` is required")))
    };
    let (a, b) = (side(first)?, side(second)?);
    let (left, right) = (texts(a, first)?, texts(b, second)?);
    if left.len() != 1 && left.len() != right.len() {
        return Err(ApiError::bad(
            *first,
            "Input lengths must be either 1:1, 1:N or N:N",
        ));
    }
    Ok((left, right))
}

/// The scores of the pairs (`left[i]`, or `left[0]` for 1:N, with `right[i]`) and the
/// prompt tokens they took.
pub async fn scores(
    state: &SharedState,
    job: &Job,
    parsed: &Parsed,
    (left, right): (Vec<String>, Vec<String>),
) -> Result<(Vec<f64>, usize), ApiError> {
    let tasks = &state.serves.tasks;
    let activation = parsed.basic.use_activation;
    if tasks.contains(&PoolingTask::Score) {
        let mut params = PoolingParams::new(PoolingTask::Score);
        params.use_activation = activation;
        let prompts = pairs(state, parsed, (left, right), &params).await?;
        let outputs = job.run(state, prompts, &parsed.scheduling).await?;
        let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
        let scores = outputs.iter().map(|o| o.values.first().copied());
        let scores = scores
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::Internal("the engine answered an empty score".into()))?;
        return Ok((scores, tokens));
    }
    if !tasks.contains(&PoolingTask::Embed) {
        require(state, PoolingTask::Score, None)?;
    }
    let n_left = left.len();
    let texts: Vec<String> = left.into_iter().chain(right).collect();
    let st = Arc::clone(state);
    let encoded: Vec<Vec<u32>> = offload(usize::MAX, move || {
        texts
            .iter()
            .map(|t| st.tokenizer.encode(t, true).map_err(text_error))
            .collect()
    })
    .await?;
    let params = PoolingParams::new(PoolingTask::Embed);
    let prompts = encoded
        .into_iter()
        .enumerate()
        .map(|(index, ids)| {
            let ids = request::check_length(state, parsed.cut.apply(ids), index, "documents")?;
            Ok(Prompt {
                ids,
                params: params.clone(),
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    let outputs = job.run(state, prompts, &parsed.scheduling).await?;
    let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
    let (firsts, seconds) = outputs.split_at(n_left);
    let scores = seconds
        .iter()
        .enumerate()
        .map(|(i, second)| {
            let first = if n_left == 1 { &firsts[0] } else { &firsts[i] };
            cosine(&first.values, &second.values)
        })
        .collect();
    Ok((scores, tokens))
}

/// The cosine similarity of `a` and `b` (0 when either is zero).
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let norms = norm(a) * norm(b);
    if norms > 0.0 {
        dot / norms
    } else {
        0.0
    }
}

/// The pairs tokenized together (special tokens added), truncated and checked, each with
/// `token_type_start` where its second text begins (none when truncation left no token
/// of either text).
async fn pairs(
    state: &SharedState,
    parsed: &Parsed,
    (left, right): (Vec<String>, Vec<String>),
    params: &PoolingParams,
) -> Result<Vec<Prompt>, ApiError> {
    let st = Arc::clone(state);
    let encoded: Vec<(Vec<u32>, Option<usize>)> = offload(usize::MAX, move || {
        right
            .iter()
            .enumerate()
            .map(|(i, second)| {
                let first = if left.len() == 1 { &left[0] } else { &left[i] };
                let encoding = st
                    .tokenizer
                    .inner()
                    .encode((first.as_str(), second.as_str()), true)
                    .map_err(|e| text_error(vrs_text::TextError::Tokenizer(e.to_string())))?;
                let start = encoding
                    .get_sequence_ids()
                    .iter()
                    .position(|s| *s == Some(1));
                Ok((encoding.get_ids().to_vec(), start))
            })
            .collect()
    })
    .await?;
    let cut = parsed.cut;
    encoded
        .into_iter()
        .enumerate()
        .map(|(index, (ids, start))| {
            let before = ids.len();
            let ids = request::check_length(state, cut.apply(ids), index, "documents")?;
            let start = start
                .map(|s| {
                    if cut.left {
                        s as i64 - (before - ids.len()) as i64
                    } else {
                        s as i64
                    }
                })
                .filter(|&s| 0 < s && (s as usize) < ids.len());
            let mut params = params.clone();
            params.token_type_start = start.map(|s| s as u64);
            Ok(Prompt { ids, params })
        })
        .collect()
}

/// vLLM's `ScoreResponse`.
#[derive(Debug, Serialize)]
pub struct ScoreResponse {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub data: Vec<ScoreData>,
    pub usage: Usage,
}

#[derive(Debug, Serialize)]
pub struct ScoreData {
    pub index: usize,
    pub object: &'static str,
    pub score: Float,
}

/// `POST /score`, `POST /v1/score`.
pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(scored(&state, body).await)
}

async fn scored(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<ScoreResponse, ApiError> {
    let job = Job::accept(state, body, "score")?;
    let parsed = request::parse(state, &job.body, &[request::SCORING, SIDE_KEYS])?;
    unsupported(&parsed.value)?;
    let sides = sides(&parsed.value)?;
    let (scores, tokens) = scores(state, &job, &parsed, sides).await?;
    Ok(ScoreResponse {
        id: job.id.clone(),
        object: "list",
        created: job.created,
        model: state.model_name.to_string(),
        data: scores
            .into_iter()
            .enumerate()
            .map(|(index, score)| ScoreData {
                index,
                object: "score",
                score: Float(score),
            })
            .collect(),
        usage: Usage::of(tokens),
    })
}
