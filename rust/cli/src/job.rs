//! An accepted generation request: prompt ids + checked settings → the engine → the
//! response (streamed or whole). Shared by chat and completions.

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use vrs_wire::EngineCoreRequest;

use crate::chat::text_error;
use crate::error::ApiError;
use crate::params::{self, Generation as Settings};
use crate::response::{self, Format};
use crate::server::AppState;
use crate::stream::Generation;

/// Prompt tokens kept to seed the incremental detokenizer.
const DETOKENIZER_SEED: usize = 8;
/// Bodies larger than this are templated and tokenized on the blocking pool.
const INLINE_TEXT_BYTES: usize = 16 * 1024;

pub struct Job {
    pub id: String,
    pub created: u64,
    prompt_ids: Vec<u32>,
    settings: Settings,
    max_tokens: u32,
}

impl Job {
    /// Checks the prompt against the context length; `what` names the prompt field.
    pub fn new(
        state: &AppState,
        settings: Settings,
        prompt_ids: Vec<u32>,
        what: &str,
        id_prefix: &str,
    ) -> Result<Self, ApiError> {
        let max_tokens = params::resolve_max_tokens(
            settings.max_tokens,
            prompt_ids.len(),
            state.max_model_len,
            what,
        )?;
        Ok(Self {
            id: format!("{id_prefix}-{}", uuid::Uuid::new_v4().simple()),
            created: crate::server::unix_now(),
            prompt_ids,
            settings,
            max_tokens,
        })
    }

    /// Submits to the engine and answers in `format`.
    pub async fn respond<F: Format>(self, state: &AppState, format: F) -> Response {
        let Self {
            id,
            prompt_ids,
            settings,
            max_tokens,
            ..
        } = self;
        let seed = prompt_ids[prompt_ids.len().saturating_sub(DETOKENIZER_SEED)..].to_vec();
        let prompt_tokens = prompt_ids.len();
        let mut sampling = settings.sampling;
        sampling.max_tokens = max_tokens;
        let request = EngineCoreRequest {
            request_id: id.clone(),
            prompt_token_ids: prompt_ids,
            sampling_params: sampling,
            arrival_time: now_f64(),
        };
        let handle = match state.client.submit(request) {
            Ok(handle) => handle,
            Err(err) => return err.into_response(),
        };
        tracing::debug!(
            request_id = %id,
            prompt_tokens,
            max_tokens,
            stream = settings.stream,
            user = settings.user.as_deref().unwrap_or(""),
            "accepted"
        );
        let generation = match Generation::new(
            handle,
            &state.tokenizer,
            &seed,
            settings.skip_special_tokens,
            &settings.stop,
            prompt_tokens,
        ) {
            Ok(g) => g,
            Err(err) => return text_error(err).into_response(),
        };
        if settings.stream {
            response::stream(generation, format, settings.include_usage)
        } else {
            response::complete(generation, format).await
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
