//! OpenAI request and response shapes (the subset this server implements).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::logprobs::{ChatLogprobs, CompletionLogprobs, PromptLogprobs};

pub mod ints;
mod message;
mod usage;
pub use message::{ChatMessage, ContentPart, MessageContent};
pub use usage::{CompletionTokensDetails, PromptTokensDetails, Usage};

// ------------------------------------------------------------------------- requests

/// Fields shared by chat and completions requests.
#[derive(Debug, Default, Deserialize)]
pub struct CommonFields {
    pub model: Option<String>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub seed: Option<i64>,
    pub stop: Option<Stop>,
    #[serde(default, deserialize_with = "ints::opt_u32s")]
    pub stop_token_ids: Option<Vec<u32>>,
    pub ignore_eos: Option<bool>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub min_tokens: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub skip_special_tokens: Option<bool>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub user: Option<String>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub n: Option<i64>,
    /// Beam search (`validate::beam_search` checks what may go with it).
    pub use_beam_search: Option<bool>,
    pub length_penalty: Option<f64>,
}

/// Keys of [`CommonFields`].
pub const COMMON_KEYS: &[&str] = &[
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "stop_token_ids",
    "ignore_eos",
    "min_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "skip_special_tokens",
    "stream",
    "stream_options",
    "user",
    "n",
    "logit_bias",
    "allowed_token_ids",
    "bad_words",
    "prompt_logprobs",
    "response_format",
    "structured_outputs",
    "use_beam_search",
    "length_penalty",
    // `validate::engine_fields` checks these (kept raw).
    "priority",
    "cache_salt",
    "thinking_token_budget",
    "vllm_xargs",
    "kv_transfer_params",
    // vLLM's extensions (ExtraFields)
    "return_token_ids",
    "return_tokens_as_token_ids",
    "truncate_prompt_tokens",
    "truncation_side",
    // vLLM's removed guided_* fields, read raw by validate::structured::guided
    "guided_json",
    "guided_regex",
    "guided_choice",
    "guided_grammar",
    "guided_whitespace_pattern",
    "guided_decoding_backend",
];

/// The sampling fields both endpoints take and `validate::sampling` checks (kept raw
/// so that every error names the field itself).
#[derive(Debug, Default, Deserialize)]
pub struct SamplingFields {
    pub logit_bias: Option<Value>,
    pub allowed_token_ids: Option<Value>,
    pub bad_words: Option<Value>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub prompt_logprobs: Option<i64>,
}

/// vLLM's request extensions, checked by `validate::extras` (the last three: chat only).
#[derive(Debug, Default, Deserialize)]
pub struct ExtraFields {
    pub return_token_ids: Option<bool>,
    pub return_tokens_as_token_ids: Option<bool>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub truncate_prompt_tokens: Option<i64>,
    pub truncation_side: Option<String>,
    pub reasoning_effort: Option<String>,
    pub include_reasoning: Option<bool>,
    pub separate_reasoning: Option<bool>,
}

/// `stop`: one string or a list of them.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(untagged, expecting = "a string or a list of strings")]
pub enum Stop {
    One(String),
    Many(Vec<String>),
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StreamOptions {
    pub include_usage: Option<bool>,
    pub continuous_usage_stats: Option<bool>,
}

/// Fields only chat requests have.
#[derive(Debug, Default, Deserialize)]
pub struct ChatFields {
    pub messages: Option<Vec<ChatMessage>>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub max_completion_tokens: Option<i64>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub logprobs: Option<bool>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub top_logprobs: Option<i64>,
    pub parallel_tool_calls: Option<bool>,
    pub echo: Option<bool>,
    // `tools` and `tool_choice` stay raw JSON: `tools::tool_settings` checks them.
}

pub const CHAT_KEYS: &[&str] = &[
    "messages",
    "max_completion_tokens",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "echo",
    // vLLM's extensions (ExtraFields)
    "reasoning_effort",
    "include_reasoning",
    "separate_reasoning",
];

/// Fields only completions requests have.
#[derive(Debug, Default, Deserialize)]
pub struct CompletionFields {
    pub prompt: Option<PromptInput>,
    #[serde(default, deserialize_with = "ints::opt_i64")]
    pub logprobs: Option<i64>,
    pub echo: Option<bool>,
}

pub const COMPLETION_KEYS: &[&str] = &["prompt", "logprobs", "echo"];

/// `prompt`: text, token ids, or a batch of one of either.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(
    untagged,
    expecting = "a string, a list of strings, a list of token ids, or a list of lists of token ids"
)]
pub enum PromptInput {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
    TokenLists(Vec<Vec<u32>>),
}

// ------------------------------------------------------------------------ responses

/// Fields every response object starts with.
#[derive(Debug, Serialize)]
pub struct Header<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub model: &'a str,
}

#[derive(Debug, Serialize)]
pub struct ChatCompletion<'a> {
    #[serde(flatten)]
    pub header: Header<'a>,
    pub choices: Vec<ChatChoice>,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
    /// `return_token_ids`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Serialize)]
pub struct ChatChoice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: &'static str,
    /// `return_token_ids`: the generated tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

/// `reasoning_content` is present (maybe null) when the server has a reasoning parser,
/// `tool_calls` when the answer made any.
#[derive(Debug, Serialize)]
pub struct AssistantMessage {
    pub role: &'static str,
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<Option<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallOut>,
}

#[derive(Debug, Serialize)]
pub struct Function {
    pub name: String,
    pub arguments: String,
}

/// A tool call in a response message.
#[derive(Debug, Serialize)]
pub struct ToolCallOut {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: Function,
}

/// A piece of a tool call in a stream delta: the first of a call has `id`, `type` and
/// `function.name`, later ones only `index` and `function.arguments` (absent fields are
/// omitted, never `null`).
#[derive(Debug, Serialize)]
pub struct ToolCallDelta {
    pub index: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub function: FunctionDelta,
}

/// The function part of a [`ToolCallDelta`].
#[derive(Debug, Serialize)]
pub struct FunctionDelta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub arguments: String,
}

#[derive(Debug, Serialize)]
pub struct ChatChunk<'a> {
    #[serde(flatten)]
    pub header: Header<'a>,
    pub choices: Vec<ChatChunkChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
    /// `return_token_ids`: on each choice's role chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Serialize)]
pub struct ChatChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: Option<&'static str>,
    /// `return_token_ids`: the chunk's tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
}

#[derive(Debug, Default, Serialize)]
pub struct Delta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
}

/// A completions response, and a streamed chunk (without usage, or without choices).
#[derive(Debug, Serialize)]
pub struct Completion<'a> {
    #[serde(flatten)]
    pub header: Header<'a>,
    pub choices: Vec<CompletionChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// `token_ids`, `prompt_token_ids`: with `return_token_ids` (streamed: the chunk's
/// tokens, the prompt's on each choice's first chunk).
#[derive(Debug, Serialize)]
pub struct CompletionChoice {
    pub index: u32,
    pub text: String,
    pub logprobs: Option<CompletionLogprobs>,
    pub finish_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token_ids: Option<Vec<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_token_ids: Option<Vec<u32>>,
}

/// `POST /tokenize` (vLLM's shape).
#[derive(Debug, Serialize)]
pub struct Tokenized {
    pub count: usize,
    pub max_model_len: u64,
    pub tokens: Vec<u32>,
    pub token_strs: Option<Vec<String>>,
}

/// `POST /detokenize` (vLLM's shape).
#[derive(Debug, Serialize)]
pub struct Detokenized {
    pub prompt: String,
}

#[derive(Debug, Serialize)]
pub struct ModelList<'a> {
    pub object: &'static str,
    pub data: [ModelCard<'a>; 1],
}

#[derive(Debug, Serialize)]
pub struct ModelCard<'a> {
    pub id: &'a str,
    pub object: &'static str,
    pub created: u64,
    pub owned_by: &'static str,
    pub root: &'a str,
    pub parent: Option<()>,
    pub max_model_len: u64,
}

#[cfg(test)]
mod tests;
