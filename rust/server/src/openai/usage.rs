//! A response's `usage`: its token counts, with the prompt's cached tokens and the
//! answer's reasoning tokens. Mirrors `Usage` in `server/openai.py`.

use serde::Serialize;

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
