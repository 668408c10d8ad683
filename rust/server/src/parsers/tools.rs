//! Tool calling: the request's `tools` / `tool_choice` ([`settings`]), the formats
//! (`--tool-call-parser`, vLLM's names: [`formats`]), the streaming parser that turns
//! generated text into content and call deltas ([`parser`], with the JSON bodies of
//! [`json_call`], `qwen3_coder`'s XML parameters, `pythonic`'s literals and the schema
//! typing of [`typed`]), and the grammar that forces a call ([`grammar`]). Mirrors the
//! package `server/parsers/tools/`.

pub mod formats;
pub mod grammar;
pub mod json_call;
pub mod parser;
pub mod pythonic;
pub mod qwen3_coder;
pub mod settings;
pub mod typed;

pub use formats::{call_prefix, format_of, prefill, ToolFormat, PARSER_NAMES};
pub use parser::{CallDelta, ToolCall, ToolCallParser, ToolDelta};
pub use settings::{check_tools, choice_text, tool_settings, ToolMode, ToolSettings};

#[cfg(test)]
mod cases;
#[cfg(test)]
mod splits;
#[cfg(test)]
mod tests;
