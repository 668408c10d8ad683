//! `POST /classify` (vLLM's `ClassificationCompletionRequest` /
//! `ClassificationChatRequest`): each prompt's class probabilities (raw logits with
//! `use_activation: false`), the label of the most probable class (from the engine's
//! READY `classify_labels`; `null` where it has none) and the class count.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use vrs_wire::{PoolingParams, PoolingTask};

use super::encoding::PyFloat;
use super::job::{Job, Scheduling};
use super::{flag, prompts_of, request, require, respond, Usage};
use crate::edge::error::ApiError;
use crate::state::SharedState;
use crate::validate::prompt::TextModel;

/// The route's own fields.
const KEYS: &[&str] = &["use_activation"];

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
    pub probs: Vec<PyFloat>,
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
    let (value, basic) = request::parse(&job.body, KEYS, true)?;
    state.check_model(basic.model.as_deref())?;
    require(state, PoolingTask::Classify)?;
    let mut params = PoolingParams::new(PoolingTask::Classify);
    params.use_activation = flag(&value, "use_activation")?;
    let scheduling = Scheduling::of(state, &value)?;
    let prompts = prompts_of(state, &value, basic, &params).await?;
    let outputs = job.run(state, prompts, &scheduling).await?;
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
                label: argmax(&o.values).and_then(|i| labels.get(i).cloned()),
                probs: o.values.iter().map(|&v| PyFloat(v)).collect(),
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
