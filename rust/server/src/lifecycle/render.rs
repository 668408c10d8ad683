//! `vrs-rs render`: start, limits and shutdown of the engine-less render service (its
//! routes: [`crate::routes::render`]), which needs only the model's tokenizer and config files
//! ([`model_limits`]). SIGINT/SIGTERM: stop accepting, let open requests finish (bounded),
//! exit 0; a model that cannot be loaded or a port that cannot be bound: exit 1. Mirrors
//! `server/lifecycle/render.py`. Behaviour: docs/api.md, "Routes"; the service:
//! docs/internals.md, "render (typer -> vrs-rs render)".

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::Signals;
use crate::args::RenderArgs;
use crate::state::{middleware, unix_now, RenderState};

/// `max_position_embeddings` when config.json has none (as `engine/mock/engine.py`).
pub(crate) const DEFAULT_MAX_POSITION_EMBEDDINGS: u64 = 4096;
/// How long open requests may take to finish after SIGINT/SIGTERM.
const DRAIN: Duration = Duration::from_secs(5);

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
pub(crate) fn load(args: &RenderArgs) -> Result<RenderState, String> {
    let dir = Path::new(&args.model);
    let (tokenizer, template) = crate::text::load_text_with(
        Path::new(args.tokenizer_dir()),
        args.chat_template.as_deref(),
        args.content_format()?,
    )?;
    let (vocab_size, max_model_len) = model_limits(
        dir,
        args.specific.max_model_len,
        tokenizer.vocab_size() as u64,
    )?;
    // `--tool-call-parser` / `--reasoning-parser`, `auto` by the template in use
    // (`--chat-template` when given), then config.json, as `serve` chooses them.
    let source = crate::text::template_source(&tokenizer, args.chat_template.as_deref());
    let (tools, reasoning) = crate::parsers::select::choose(
        args.specific.tool_call_parser.as_deref(),
        args.specific.reasoning_parser.as_deref(),
        source.as_deref(),
        crate::parsers::select::model_config(dir).as_ref(),
    )?;
    Ok(RenderState {
        tokenizer,
        template,
        model_name: args.served_model_name().to_owned(),
        model_root: args.model.clone(),
        created: unix_now(),
        max_model_len,
        vocab_size,
        tool_parser: tools.name,
        reasoning_parser: reasoning.name,
        middleware: middleware(&args.http)?,
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
    let mut signals = Signals::new()?;
    let loading = args.clone();
    let state = tokio::task::spawn_blocking(move || load(&loading))
        .await?
        .map_err(anyhow::Error::msg)?;
    let endpoint = super::endpoint::bind(&args.http, args.host(), args.port()).await?;
    let url = endpoint.url();
    tracing::info!(
        "render service for {:?} ({}): max_model_len {}, vocab {}{}; listening on {url}",
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
    let (stop_tx, mut server) = endpoint.spawn(crate::routes::render_router(Arc::new(state)));
    let name = tokio::select! {
        name = signals.recv() => name,
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
