//! The fast paths for byte-level BPE tokenizers (GPT-2, Llama 3, Qwen, DeepSeek): the
//! same ids and text as the `tokenizers` pipeline, faster (see docs/internals.md).
//!
//! - [`encoder`]: added tokens, then the pre-tokenizer ([`pretokenizer`]), then BPE on
//!   raw bytes ([`bpe`]);
//! - [`byte_decoder`]: every id's bytes computed at load, so decoding is concatenation.

pub(crate) mod bpe;
pub(crate) mod byte_decoder;
pub(crate) mod encoder;
pub(crate) mod pretokenizer;
