//! The model's text assets (the tokenizer and the chat template, loaded once at start)
//! and where text work runs.

use std::path::Path;

use vrs_text::{ChatTemplate, ContentFormatOption, TextError, Tokenizer};

use crate::edge::error::ApiError;

pub mod tokenizer_info;

/// Bodies larger than this are templated and tokenized on the blocking pool.
const INLINE_TEXT_BYTES: usize = 16 * 1024;

/// The tokenizer and the chat template (if the model has one).
pub type Text = (Tokenizer, Option<Template>);

/// The compiled chat template (absent when the model has none).
pub type Template = ChatTemplate;

/// Loads the tokenizer and the chat template of `dir` (the model directory, or the
/// `tokenizer` directory of the args) or from `override_path` when given; content format
/// `auto`.
pub fn load_text(
    dir: &Path,
    override_path: Option<&str>,
) -> Result<(Tokenizer, Option<Template>), String> {
    load_text_with(dir, override_path, ContentFormatOption::Auto)
}

/// [`load_text`] with `--chat-template-content-format` `content_format` (logged).
pub fn load_text_with(
    dir: &Path,
    override_path: Option<&str>,
    content_format: ContentFormatOption,
) -> Result<(Tokenizer, Option<Template>), String> {
    let tokenizer =
        Tokenizer::from_dir(dir).map_err(|e| format!("cannot load the tokenizer: {e}"))?;
    match tokenizer.fast_encoder() {
        Ok(()) => tracing::info!("tokenizer: fast byte-level BPE encoder"),
        Err(why) => tracing::info!("tokenizer: the tokenizers pipeline ({why})"),
    }
    match ChatTemplate::from_config(tokenizer.config(), override_path.map(Path::new)) {
        Ok(template) => {
            let template = template.with_content_format(content_format);
            tracing::info!("{}", template.content_format_line());
            Ok((tokenizer, Some(template)))
        }
        Err(TextError::NoChatTemplate(message)) => {
            tracing::warn!("{message}");
            Ok((tokenizer, None))
        }
        Err(e) => Err(format!("cannot load the chat template: {e}")),
    }
}

/// The chat template's source (`override_path` when given), for `--tool-call-parser
/// auto`.
pub fn template_source(tokenizer: &Tokenizer, override_path: Option<&str>) -> Option<String> {
    match override_path {
        Some(path) => std::fs::read_to_string(path).ok(),
        None => tokenizer
            .config()
            .chat_template("default")
            .map(str::to_owned),
    }
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
