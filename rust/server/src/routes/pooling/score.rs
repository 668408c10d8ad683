//! `POST /score` and `/v1/score` (vLLM's `ScoreRequest`s): the relevance of each
//! (query, document) pair, 1:1, 1:N or N:N. On a model that serves the "score" task (a
//! cross-encoder) each pair is tokenized together (the tokenizer's pair encoding) and
//! scored by the engine, `token_type_start` marking the document's first token; on an
//! embedding model each text is embedded once and a pair's score is the cosine
//! similarity of its embeddings, as vLLM's bi-encoder scoring. The rerank routes score
//! the same way ([`super::rerank`]).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use serde_json::Value;
use vrs_wire::{PoolingParams, PoolingTask};

use super::encoding::PyFloat;
use super::job::{Job, Prompt, Scheduling};
use super::request::{self, Basic, Truncation};
use super::{flag, require, respond, Usage};
use crate::edge::error::{text_error, ApiError};
use crate::state::SharedState;
use crate::text::offload;
use crate::validate::prompt::TextModel;

/// The four ways to name a score request's two sides, in vLLM's order.
const FORMS: [(&str, &str); 4] = [
    ("queries", "documents"),
    ("queries", "items"),
    ("data_1", "data_2"),
    ("text_1", "text_2"),
];
/// The route's own fields.
const KEYS: &[&str] = &[
    "queries",
    "documents",
    "items",
    "data_1",
    "data_2",
    "text_1",
    "text_2",
    "use_activation",
];

/// The texts of one side: a string or a list of strings (`field` names it).
pub fn texts(value: Option<&Value>, field: &str) -> Result<Vec<String>, ApiError> {
    let shape = || {
        ApiError::bad(
            field,
            format!("`{field}` must be a string or a list of strings (text only)"),
        )
    };
    match value {
        None | Some(Value::Null) => Err(ApiError::bad(field, format!("`{field}` is required"))),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(shape),
        Some(_) => Err(shape()),
    }
}

/// vLLM's check of the two sides' lengths: 1:1, 1:N or N:N, neither empty.
pub fn check_lengths(first: usize, second: usize) -> Result<(), ApiError> {
    if first > 1 && first != second {
        return Err(ApiError::bad_request(
            "Input lengths must be either 1:1, 1:N or N:N",
        ));
    }
    if first == 0 {
        return Err(ApiError::bad_request(
            "At least one text element must be given",
        ));
    }
    if second == 0 {
        return Err(ApiError::bad_request(
            "At least one text_pair element must be given",
        ));
    }
    Ok(())
}

/// The two sides of a scoring request: each side's field and texts.
pub type Sides = ((&'static str, Vec<String>), (&'static str, Vec<String>));

/// The scores of the pairs (`queries[i]` or `queries[0]`, `documents[i]`) and the prompt
/// tokens they took.
pub async fn scores(
    state: &SharedState,
    job: &Job,
    ((first, queries), (second, documents)): Sides,
    value: &Value,
    basic: &Basic,
) -> Result<(Vec<f64>, usize), ApiError> {
    check_lengths(queries.len(), documents.len())?;
    let cut = Truncation::of(state, basic)?;
    let activation = flag(value, "use_activation")?;
    let scheduling = Scheduling::of(state, value)?;
    if state.serves.tasks.contains(&PoolingTask::Score) {
        let mut params = PoolingParams::new(PoolingTask::Score);
        params.use_activation = activation;
        let prompts = pairs(state, (queries, documents), (cut, second), &params).await?;
        let outputs = job.run(state, prompts, &scheduling).await?;
        let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
        let scores = outputs
            .iter()
            .map(|o| o.values.first().copied())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| ApiError::Internal("the engine answered an empty score".into()))?;
        return Ok((scores, tokens));
    }
    require(state, PoolingTask::Embed).map_err(|_| {
        ApiError::bad_request(format!(
            "The model `{}` serves neither the \"score\" nor the \"embed\" pooling task, so \
             it cannot score.",
            state.model_name
        ))
    })?;
    let params = PoolingParams::new(PoolingTask::Embed);
    let n_queries = queries.len();
    let mut ids = request::prompts(state, request::Input::Texts(queries), true, cut, first).await?;
    let docs = request::Input::Texts(documents);
    ids.extend(request::prompts(state, docs, true, cut, second).await?);
    let prompts = ids
        .into_iter()
        .map(|ids| Prompt {
            ids,
            params: params.clone(),
        })
        .collect();
    let outputs = job.run(state, prompts, &scheduling).await?;
    let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
    let (q, d) = outputs.split_at(n_queries);
    let scores = d
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let query = if q.len() == 1 { &q[0] } else { &q[i] };
            cosine(&query.values, &doc.values)
        })
        .collect();
    Ok((scores, tokens))
}

/// The cosine similarity of `a` and `b` (torch's: the norms' product at least 1e-8),
/// rounded to float32 as the engine's scores are.
pub fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
    let similarity = dot / (norm(a) * norm(b)).max(1e-8);
    f64::from(similarity as f32)
}

/// The pairs tokenized together (special tokens added), truncated, each with the index
/// of its document's first token.
async fn pairs(
    state: &SharedState,
    (queries, documents): (Vec<String>, Vec<String>),
    (cut, field): (Truncation, &str),
    params: &PoolingParams,
) -> Result<Vec<Prompt>, ApiError> {
    let st = Arc::clone(state);
    let size = queries.iter().chain(&documents).map(String::len).sum();
    let encoded: Vec<(Vec<u32>, Option<usize>)> = offload(size, move || {
        documents
            .iter()
            .enumerate()
            .map(|(i, doc)| {
                let query = if queries.len() == 1 {
                    &queries[0]
                } else {
                    &queries[i]
                };
                let encoding = st
                    .tokenizer
                    .inner()
                    .encode((query.as_str(), doc.as_str()), true)
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
    encoded
        .into_iter()
        .map(|(ids, start)| {
            let total = ids.len();
            let ids = request::check(state, cut.apply(ids), field)?;
            // Left truncation moves the document's start back by what it cut.
            let cut_before = if cut.left { total - ids.len() } else { 0 };
            let mut params = params.clone();
            params.token_type_start =
                start.map(|s| s.saturating_sub(cut_before).min(ids.len()) as u64);
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
    pub score: PyFloat,
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
    let (value, basic) = request::parse(&job.body, KEYS, false)?;
    state.check_model(basic.model.as_deref())?;
    let sides = sides(&value)?;
    let (scores, tokens) = scores(state, &job, sides, &value, &basic).await?;
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
                score: PyFloat(score),
            })
            .collect(),
        usage: Usage::of(tokens),
    })
}

/// The two sides of a score request, named in exactly one of the [`FORMS`].
fn sides(value: &Value) -> Result<Sides, ApiError> {
    let given = |k: &str| value.get(k).is_some_and(|v| !v.is_null());
    let named: Vec<&str> = KEYS[..7].iter().copied().filter(|k| given(k)).collect();
    let form = FORMS
        .iter()
        .find(|(a, b)| named.len() == 2 && named.contains(a) && named.contains(b));
    let Some((first, second)) = form else {
        return Err(ApiError::bad_request(
            "give the texts to score as `queries` and `documents` (or `queries` and `items`, \
             `data_1` and `data_2`, `text_1` and `text_2`), one pair of them",
        ));
    };
    Ok((
        (first, texts(value.get(*first), first)?),
        (second, texts(value.get(*second), second)?),
    ))
}
