//! `vrs-rs render`: the engine-less render service (template + tokenization only).
//!
//! Needs only the model's tokenizer and config files. Routes (same shapes and errors as
//! `engine/frontend/render.py`): `POST /v1/chat/completions/render` and
//! `POST /v1/completions/render` run the serving path's own prompt builder
//! ([`crate::prompt`]) and answer with what the engine would receive (`request_id`,
//! `model`, `prompt`, `prompt_token_ids`, `sampling_params` with the wire's field names);
//! chat requests may carry `tools` (rendered by the template) with `tool_choice` `none`
//! or `auto`. `GET /v1/models`, `GET /health`.
//!
//! The engine's limits come from `config.json` as the mock engine reads them:
//! `max_model_len` (args) else `max_position_embeddings` (default 4096), and
//! `vocab_size` (else the tokenizer's). SIGINT/SIGTERM: stop accepting, let open
//! requests finish (bounded), exit 0; a model that cannot be loaded or a port that
//! cannot be bound: exit 1.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use tokio::signal::unix::{signal, SignalKind};
use vrs_text::Tokenizer;
use vrs_wire::SamplingParams;

use crate::chat::Template;
use crate::error::ApiError;
use crate::prompt::{self, Prompt, TextModel};
use crate::render_args::RenderArgs;
use crate::server::{self, body_bytes, MAX_BODY_BYTES};

/// `max_position_embeddings` when config.json has none (as `engine/mock.py`).
const DEFAULT_MAX_POSITION_EMBEDDINGS: u64 = 4096;
/// How long open requests may take to finish after SIGINT/SIGTERM.
const DRAIN: Duration = Duration::from_secs(5);

/// The render service's state: the model's text assets and limits.
pub struct RenderState {
    pub tokenizer: Tokenizer,
    pub template: Option<Template>,
    pub model_name: String,
    pub model_root: String,
    pub created: u64,
    pub max_model_len: u64,
    pub vocab_size: u64,
    /// Picked from the template (`--tool-call-parser auto`).
    pub tool_parser: Option<&'static str>,
}

impl TextModel for RenderState {
    fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    fn template(&self) -> Option<&Template> {
        self.template.as_ref()
    }

    fn check_model(&self, model: Option<&str>) -> Result<(), ApiError> {
        server::check_model(&self.model_name, model)
    }

    fn vocab_size(&self) -> u64 {
        self.vocab_size
    }

    fn max_model_len(&self) -> u64 {
        self.max_model_len
    }

    fn tool_parser(&self) -> Option<&'static str> {
        self.tool_parser
    }
}

/// The answer of a render route.
#[derive(Serialize)]
struct Rendered<'a> {
    request_id: String,
    model: &'a str,
    prompt: Option<String>,
    prompt_token_ids: Vec<u32>,
    sampling_params: SamplingParams,
}

fn rendered(state: &RenderState, prefix: &str, prompt: Prompt) -> Response {
    Json(Rendered {
        request_id: crate::job::request_id(prefix),
        model: &state.model_name,
        prompt: prompt.text,
        prompt_token_ids: prompt.ids,
        sampling_params: prompt.settings.sampling,
    })
    .into_response()
}

pub fn router(state: Arc<RenderState>) -> Router {
    Router::new()
        .route("/v1/chat/completions/render", post(chat))
        .route("/v1/completions/render", post(completion))
        .route("/v1/models", get(models))
        .route("/health", get(|| async { StatusCode::OK }))
        .fallback(server::not_found)
        .method_not_allowed_fallback(server::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn chat(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body_bytes(body) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    match prompt::chat(&state, body).await {
        Ok(prompt) => rendered(&state, "chatcmpl", prompt),
        Err(err) => err.into_response(),
    }
}

async fn completion(
    State(state): State<Arc<RenderState>>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body_bytes(body) {
        Ok(body) => body,
        Err(err) => return err.into_response(),
    };
    match prompt::completion(&state, body).await {
        Ok(prompt) => rendered(&state, "cmpl", prompt),
        Err(err) => err.into_response(),
    }
}

async fn models(State(state): State<Arc<RenderState>>) -> Response {
    server::model_list(
        &state.model_name,
        state.created,
        &state.model_root,
        state.max_model_len,
    )
}

/// `(vocab_size, max_model_len)` of a model directory, as an engine would report them.
pub fn model_limits(
    dir: &Path,
    max_model_len: Option<u64>,
    tokenizer_vocab: u64,
) -> Result<(u64, u64), String> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let config: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !config.is_object() {
        return Err(format!("{} is not a JSON object", path.display()));
    }
    let number = |key: &str, default: u64| match config.get(key) {
        None | Some(serde_json::Value::Null) => Ok(default),
        Some(v) => match v.as_u64() {
            Some(0) => Ok(default),
            Some(n) => Ok(n),
            None => Err(format!(
                "{}: vocab_size and max_position_embeddings must be integers",
                path.display()
            )),
        },
    };
    let vocab = number("vocab_size", tokenizer_vocab)?;
    let native = number("max_position_embeddings", DEFAULT_MAX_POSITION_EMBEDDINGS)?;
    Ok((vocab, max_model_len.unwrap_or(native)))
}

/// Loads the model's text assets and limits.
fn load(args: &RenderArgs) -> Result<RenderState, String> {
    let dir = Path::new(&args.model);
    let (tokenizer, template) = crate::chat::load_text(dir, args.chat_template.as_deref())?;
    let (vocab_size, max_model_len) = model_limits(
        dir,
        args.specific.max_model_len,
        tokenizer.vocab_size() as u64,
    )?;
    let tool_parser = crate::tools::pick_parser(None, tokenizer.config().chat_template("default"))?;
    Ok(RenderState {
        tokenizer,
        template,
        model_name: args.served_model_name().to_owned(),
        model_root: args.model.clone(),
        created: server::unix_now(),
        max_model_len,
        vocab_size,
        tool_parser,
    })
}

/// Runs `vrs-rs render` to the end; returns the exit code.
pub async fn run(args: RenderArgs) -> u8 {
    match serve(args).await {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("{e}");
            1
        }
    }
}

async fn serve(args: RenderArgs) -> anyhow::Result<()> {
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let loading = args.clone();
    let state = tokio::task::spawn_blocking(move || load(&loading))
        .await?
        .map_err(anyhow::Error::msg)?;
    let listener = server::bind_http(args.host(), args.port()).await?;
    let local = listener.local_addr()?;
    tracing::info!(
        "render service for {:?} ({}): max_model_len {}, vocab {}{}; listening on http://{local}",
        state.model_name,
        state.model_root,
        state.max_model_len,
        state.vocab_size,
        if state.template.is_some() {
            ""
        } else {
            "; no chat template"
        },
    );
    let (stop_tx, mut server) = server::spawn_http(listener, router(Arc::new(state)));
    let name = tokio::select! {
        _ = sigint.recv() => "SIGINT",
        _ = sigterm.recv() => "SIGTERM",
        joined = &mut server => {
            joined??;
            anyhow::bail!("the HTTP server stopped");
        }
    };
    tracing::info!("{name}: no longer accepting; stopping");
    let _ = stop_tx.send(());
    if tokio::time::timeout(DRAIN, &mut server).await.is_err() {
        tracing::warn!("connections still open {DRAIN:?} after {name}; exiting");
    }
    Ok(())
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
