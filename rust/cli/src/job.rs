//! An accepted generation request: prompt ids + checked settings → the engine → the
//! response (streamed or whole). Shared by chat and completions.

use std::sync::Arc;
use std::time::Instant;

use axum::response::{IntoResponse, Response};
use vrs_wire::EngineCoreRequest;

use crate::admission::Permit;
use crate::chat::text_error;
use crate::error::ApiError;
use crate::prompt::Prompt;
use crate::response::{self, Deadline, Shapes};
use crate::server::AppState;
use crate::stream::{Generation, Observer};

/// Prompt tokens kept to seed the incremental detokenizer.
const DETOKENIZER_SEED: usize = 8;
/// Bodies larger than this are templated and tokenized on the blocking pool.
const INLINE_TEXT_BYTES: usize = 16 * 1024;

pub struct Job {
    pub id: String,
    pub created: u64,
    pub prompt: Prompt,
    arrival: Instant,
    permit: Permit,
}

/// A fresh request id: `PREFIX-<32 hex digits>`.
pub fn request_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

impl Job {
    /// An accepted request (its prompt already checked against the context length),
    /// admitted by `permit`, that arrived at `arrival`.
    pub fn new(prompt: Prompt, id_prefix: &str, arrival: Instant, permit: Permit) -> Self {
        Self {
            id: request_id(id_prefix),
            created: crate::server::unix_now(),
            prompt,
            arrival,
            permit,
        }
    }

    /// Submits the request's `n` choices to the engine (choice `i` of several gets id
    /// `ID-i` and seed `seed + i`) and answers in `shapes`.
    pub async fn respond<S: Shapes>(self, state: &AppState, shapes: S) -> Response {
        let Self {
            id,
            prompt,
            arrival,
            permit,
            ..
        } = self;
        let settings = prompt.settings;
        let ids = prompt.ids;
        let tail = &ids[ids.len().saturating_sub(DETOKENIZER_SEED)..];
        let observer = Observer {
            metrics: Arc::clone(&state.metrics),
            arrival,
        };
        state.metrics.prompt_tokens(ids.len());
        let n = settings.n.max(1);
        let mut generations = Vec::with_capacity(n as usize);
        for index in 0..n {
            let mut sampling = settings.sampling.clone();
            let request_id = if n > 1 {
                sampling.seed = sampling.seed.map(|s| s.wrapping_add(i64::from(index)));
                format!("{id}-{index}")
            } else {
                id.clone()
            };
            let request = EngineCoreRequest {
                request_id,
                prompt_token_ids: ids.clone(),
                sampling_params: sampling,
                arrival_time: now_f64(),
            };
            let handle = match state.client.submit(request) {
                Ok(handle) => handle,
                Err(err) => return err.into_response(),
            };
            match Generation::new(
                handle,
                &state.tokenizer,
                tail,
                settings.skip_special_tokens,
                &settings.stop,
                ids.len(),
                observer.clone(),
            ) {
                Ok(g) => generations.push(g),
                Err(err) => return text_error(err).into_response(),
            }
        }
        tracing::debug!(
            request_id = %id,
            prompt_tokens = ids.len(),
            max_tokens = settings.sampling.max_tokens,
            n,
            stream = settings.stream,
            user = settings.user.as_deref().unwrap_or(""),
            "accepted"
        );
        let deadline = state.options.request_timeout.map(|timeout| Deadline {
            at: tokio::time::Instant::from_std(arrival + timeout),
            timeout,
        });
        if settings.stream {
            response::stream(
                generations,
                shapes,
                settings.include_usage,
                deadline,
                permit,
            )
        } else {
            response::complete(generations, shapes, deadline, permit).await
        }
    }
}

fn now_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs CPU-heavy text work inline when small, on the blocking pool when `size` is large.
pub async fn offload<T: Send + 'static>(
    size: usize,
    work: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    if size < INLINE_TEXT_BYTES {
        return work();
    }
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ApiError::Internal(format!("text worker failed: {e}")))?
}

/// The served model name, shared by every response.
pub fn model_name(state: &AppState) -> Arc<str> {
    Arc::clone(&state.model_name)
}
