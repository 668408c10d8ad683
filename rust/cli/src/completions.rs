//! `POST /v1/completions`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use crate::chat::text_error;
use crate::error::ApiError;
use crate::job::{self, Job};
use crate::openai::{
    CommonFields, Completion, CompletionChoice, CompletionFields, Header, Prompt, Usage,
};
use crate::params::{self, Endpoint};
use crate::response::Format;
use crate::server::{body_bytes, SharedState};
use crate::sse;

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match prepare(&state, body).await {
        Ok(job) => {
            let format = CompletionFormat {
                id: job.id.clone(),
                created: job.created,
                model: job::model_name(&state),
            };
            job.respond(&state, format).await
        }
        Err(err) => err.into_response(),
    }
}

async fn prepare(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Job, ApiError> {
    let body = body_bytes(body)?;
    let map = params::parse_object(&body)?;
    params::check_keys(&map, Endpoint::Completions)?;
    let value = Value::Object(map);
    let common: CommonFields = params::fields(&value)?;
    let fields: CompletionFields = params::fields(&value)?;
    let settings = params::validate(common, None, state.vocab_size)?;
    state.check_model(settings.model.as_deref())?;
    let text = match fields.prompt {
        None => return Err(ApiError::bad("prompt", "`prompt` is required")),
        Some(Prompt::Text(text)) => text,
        Some(Prompt::Texts(mut texts)) if texts.len() == 1 => texts.swap_remove(0),
        Some(Prompt::Tokens(ids)) => return tokens_job(state, settings, ids),
        Some(Prompt::TokenLists(mut lists)) if lists.len() == 1 => {
            return tokens_job(state, settings, lists.swap_remove(0))
        }
        Some(Prompt::Texts(list)) => return Err(batched(list.len())),
        Some(Prompt::TokenLists(list)) => return Err(batched(list.len())),
    };
    let st = Arc::clone(state);
    let ids = job::offload(text.len(), move || {
        st.tokenizer.encode(&text, true).map_err(text_error)
    })
    .await?;
    Job::new(state, settings, ids, "prompt", "cmpl")
}

fn batched(n: usize) -> ApiError {
    ApiError::bad(
        "prompt",
        format!("batched prompts (a list of {n}) are not supported; send one prompt per request"),
    )
}

fn tokens_job(
    state: &SharedState,
    settings: params::Generation,
    ids: Vec<u32>,
) -> Result<Job, ApiError> {
    if let Some(bad) = ids.iter().find(|&&id| u64::from(id) >= state.vocab_size) {
        return Err(ApiError::bad(
            "prompt",
            format!(
                "token id {bad} in `prompt` is out of the vocabulary (size {})",
                state.vocab_size
            ),
        ));
    }
    Job::new(state, settings, ids, "prompt", "cmpl")
}

/// Completions response shapes.
pub struct CompletionFormat {
    pub id: String,
    pub created: u64,
    pub model: Arc<str>,
}

impl CompletionFormat {
    fn header(&self) -> Header<'_> {
        Header {
            id: &self.id,
            object: "text_completion",
            created: self.created,
            model: &self.model,
        }
    }
}

impl Format for CompletionFormat {
    fn start(&self, _buf: &mut Vec<u8>) {}

    fn delta(&self, buf: &mut Vec<u8>, text: &str, finish: Option<&str>) {
        let choices = [CompletionChoice {
            index: 0,
            text,
            logprobs: None,
            finish_reason: finish,
        }];
        sse::push_event(
            buf,
            &Completion {
                header: self.header(),
                choices: &choices,
                usage: None,
            },
        );
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        sse::push_event(
            buf,
            &Completion {
                header: self.header(),
                choices: &[],
                usage: Some(usage),
            },
        );
    }

    fn complete(&self, text: &str, finish: &str, usage: Usage) -> Vec<u8> {
        let choices = [CompletionChoice {
            index: 0,
            text,
            logprobs: None,
            finish_reason: Some(finish),
        }];
        let body = Completion {
            header: self.header(),
            choices: &choices,
            usage: Some(usage),
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}
