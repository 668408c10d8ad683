//! What every serving start-up shares: the tokenizer and chat template loaded on a
//! blocking thread while the engines start, and (for the adopted `frontend` start-ups)
//! the wait for both, cut short by SIGINT/SIGTERM.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinHandle;
use vrs_engine_client::EngineError;

use super::Signals;
use crate::args::ServeArgs;
use crate::text::Text;

/// Starts loading the tokenizer and chat template of `args` on a blocking thread.
pub fn load_text(args: &ServeArgs) -> Result<JoinHandle<Result<Text, String>>, EngineError> {
    let tokenizer_dir = std::path::PathBuf::from(args.tokenizer_dir());
    let chat_template = args.chat_template.clone();
    let content_format = args.content_format().map_err(EngineError::Setup)?;
    Ok(tokio::task::spawn_blocking(move || {
        crate::text::load_text_with(&tokenizer_dir, chat_template.as_deref(), content_format)
    }))
}

/// Awaits the engines' `ready` (a blocking wait that checks `cancel`) and the `text`
/// load together. `Err` is the exit code: 0 after a signal, 1 after a failure (logged);
/// either way `cancel` is set, so the wait stops.
pub async fn ready_and_text<T>(
    ready: JoinHandle<Result<T, EngineError>>,
    text: JoinHandle<Result<Text, String>>,
    signals: &mut Signals,
    cancel: &AtomicBool,
) -> Result<(T, Text), u8> {
    let text = async {
        text.await
            .map_err(|e| EngineError::Task(e.to_string()))?
            .map_err(EngineError::Setup)
    };
    let engines = async { ready.await.map_err(|e| EngineError::Task(e.to_string()))? };
    let outcome = tokio::select! {
        both = async { tokio::try_join!(engines, text) } => both,
        name = signals.recv() => {
            tracing::info!("{name} during startup; exiting");
            cancel.store(true, Ordering::SeqCst);
            return Err(0);
        }
    };
    outcome.map_err(|e| {
        cancel.store(true, Ordering::SeqCst);
        tracing::error!("{e}");
        1
    })
}
