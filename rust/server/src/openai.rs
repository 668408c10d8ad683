//! OpenAI request and response shapes (the subset this server implements).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::logprobs::{ChatLogprobs, CompletionLogprobs, PromptLogprobs};

pub mod ints;

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
];

/// One chat message as the client sent it.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Option<MessageContent>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<Value>>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub reasoning_content: Option<String>,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(untagged, expecting = "a string or a list of content parts")]
pub enum MessageContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Deserialize, PartialEq)]
pub struct ContentPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
}

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

/// A response's token counts. `prompt_tokens_details.cached_tokens`: the prompt tokens
/// the engine found in its prefix cache (vLLM's shape; always present, 0 for a fresh
/// prompt or before the engine's first output). `completion_tokens_details
/// .reasoning_tokens`: a chat answer's reasoning tokens, present only when the server has
/// a reasoning parser (see `crate::output::reasoning_tokens`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
    pub prompt_tokens_details: PromptTokensDetails,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PromptTokensDetails {
    pub cached_tokens: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CompletionTokensDetails {
    pub reasoning_tokens: u32,
}

impl Usage {
    /// The usage of a prompt none of whose tokens were (yet) known to be cached.
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            prompt_tokens_details: PromptTokensDetails::default(),
            completion_tokens_details: None,
        }
    }

    /// The same usage with `reasoning_tokens` of its completion tokens spent reasoning
    /// (`None`: the server has no reasoning parser; the details are left out).
    pub fn with_reasoning(mut self, reasoning_tokens: Option<u32>) -> Self {
        self.completion_tokens_details =
            reasoning_tokens.map(|reasoning_tokens| CompletionTokensDetails { reasoning_tokens });
        self
    }

    /// Its reasoning tokens (0 when not counted).
    pub fn reasoning_tokens(&self) -> u32 {
        self.completion_tokens_details
            .map_or(0, |d| d.reasoning_tokens)
    }

    /// The same usage with `cached_tokens` of its prompt tokens from the prefix cache.
    pub fn with_cached(mut self, cached_tokens: u32) -> Self {
        self.prompt_tokens_details.cached_tokens = cached_tokens;
        self
    }

    pub fn cached_tokens(&self) -> u32 {
        self.prompt_tokens_details.cached_tokens
    }
}

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
}

#[derive(Debug, Serialize)]
pub struct ChatChoice {
    pub index: u32,
    pub message: AssistantMessage,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: &'static str,
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
}

#[derive(Debug, Serialize)]
pub struct ChatChunkChoice {
    pub index: u32,
    pub delta: Delta,
    pub logprobs: Option<ChatLogprobs>,
    pub finish_reason: Option<&'static str>,
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

#[derive(Debug, Serialize)]
pub struct CompletionChoice {
    pub index: u32,
    pub text: String,
    pub logprobs: Option<CompletionLogprobs>,
    pub finish_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_logprobs: Option<PromptLogprobs>,
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
