//! `POST /classify` (vLLM's `ClassificationCompletionRequest` /
//! `ClassificationChatRequest`): each prompt's class probabilities (raw logits with
//! `use_activation: false`), the label of the most probable class (from the engine's
//! READY `classify_labels`; `LABEL_<i>` past them, as transformers' default `id2label`)
//! and the class count. Mirrors `server/routes/pooling/classify.py`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use vrs_wire::{PoolingParams, PoolingTask};

use super::dispatch::Job;
use super::encoding::{floats, Float};
use super::{prompts_of, request, require, respond, Usage};
use crate::edge::error::ApiError;
use crate::state::SharedState;

/// vLLM's `ClassificationResponse`.
#[derive(Debug, Serialize)]
pub struct ClassificationResponse {
    pub id: String,
    pub object: &'static str,
    pub created: u64,
    pub model: String,
    pub data: Vec<ClassificationData>,
    pub usage: Usage,
}

#[derive(Debug, Serialize)]
pub struct ClassificationData {
    pub index: usize,
    pub label: Option<String>,
    pub probs: Vec<Float>,
    pub num_classes: usize,
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    respond(classified(&state, body).await)
}

/// The index of the largest value (the first of equals), as numpy's `argmax`.
pub fn argmax(values: &[f64]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, &v) in values.iter().enumerate() {
        match best {
            Some((_, b)) if v <= b => {}
            _ => best = Some((i, v)),
        }
    }
    best.map(|(i, _)| i)
}

async fn classified(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<ClassificationResponse, ApiError> {
    let job = Job::accept(state, body, "classify")?;
    let parsed = request::parse(state, &job.body, &[request::INPUT])?;
    require(state, PoolingTask::Classify, None)?;
    let mut params = PoolingParams::new(PoolingTask::Classify);
    params.use_activation = parsed.basic.use_activation;
    let prompts = prompts_of(state, &parsed, &params).await?;
    let outputs = job.run(state, prompts, &parsed.scheduling).await?;
    let tokens = outputs.iter().map(|o| o.prompt_tokens).sum();
    let labels = &state.serves.labels;
    Ok(ClassificationResponse {
        id: job.id.clone(),
        object: "list",
        created: job.created,
        model: state.model_name.to_string(),
        data: outputs
            .iter()
            .enumerate()
            .map(|(index, o)| ClassificationData {
                index,
                label: argmax(&o.values).map(|i| {
                    labels
                        .get(i)
                        .cloned()
                        .unwrap_or_else(|| format!("LABEL_{i}"))
                }),
                probs: floats(&o.values),
                num_classes: o.values.len(),
            })
            .collect(),
        usage: Usage::of(tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::argmax;

    #[test]
    fn argmax_takes_the_first_of_equals() {
        assert_eq!(argmax(&[0.1, 0.7, 0.7, 0.2]), Some(1));
        assert_eq!(argmax(&[-1.0]), Some(0));
        assert_eq!(argmax(&[]), None);
    }
}
