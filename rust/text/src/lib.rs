//! The vrs text path: everything between a request's JSON and token ids, and back.
//!
//! * [`Tokenizer`] — HF `tokenizer.json` through the `tokenizers` crate, with a faster
//!   encoder of the same ids for byte-level BPE tokenizers;
//! * [`ChatTemplate`] — the model's jinja chat template through minijinja, behaving like
//!   transformers' jinja2 environment (`tojson`, `raise_exception`, Python methods...);
//! * [`IncrementalDetokenizer`] — streamed text that never splits a UTF-8 character;
//! * [`StopMatcher`] — stop strings matched across chunk boundaries.
//!
//! Everything here is synchronous and thread-safe; [`Tokenizer`] and [`ChatTemplate`] are
//! cheap to clone (shared, compiled once).

mod config;
mod detokenizer;
mod error;
mod fast;
mod stop;
mod template;
#[cfg(test)]
mod testutil;
mod tokenizer;

pub use config::TokenizerConfig;
pub use detokenizer::IncrementalDetokenizer;
pub use error::{Result, TextError};
pub use stop::{StopMatcher, StopOutcome};
pub use template::content_format::{
    detect as detect_content_format, ContentFormat, ContentFormatOption,
};
pub use template::{ChatTemplate, ChatTemplateInput};
pub use tokenizer::{Tokenizer, FAST_ENCODER_ENV};
