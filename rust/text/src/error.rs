//! The one error type of the text path.

use std::path::PathBuf;

/// Result of the text path.
pub type Result<T, E = TextError> = std::result::Result<T, E>;

/// Errors of the text path. [`TextError::Template`] and [`TextError::InvalidInput`] are the
/// user's fault (HTTP 400); the others are the server's setup or a bug.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A JSON file did not parse.
    #[error("invalid JSON in {path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A model file has an unexpected shape.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// The `tokenizers` library failed (loading, encoding or decoding).
    #[error("tokenizer error: {0}")]
    Tokenizer(String),
    /// The model has no chat template (and none was given).
    #[error("{0}")]
    NoChatTemplate(String),
    /// The chat template failed to compile or to render, or called `raise_exception`
    /// (the message is then exactly the template's).
    #[error("{0}")]
    Template(String),
    /// The request cannot be rendered (e.g. `continue_final_message` on an empty chat).
    #[error("{0}")]
    InvalidInput(String),
}

impl TextError {
    /// True when the user's request caused this error (answer 400, not 500).
    pub fn is_user_error(&self) -> bool {
        matches!(self, Self::Template(_) | Self::InvalidInput(_))
    }
}
