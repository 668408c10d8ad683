//! The `backend` key: which API the requests use, and what each one measures.

use serde::Deserialize;

/// Which API the requests use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// `POST /v1/completions` with `prompt`.
    OpenaiCompletions,
    /// `POST /v1/chat/completions` with one user message.
    OpenaiChat,
    /// `POST /v1/responses` with `input` (one user message).
    OpenaiResponses,
    /// `POST /v1/messages` (Anthropic) with one user message.
    AnthropicMessages,
    /// `POST /v1/embeddings` with `input` (the prompt text): a pooling request, answered
    /// in one JSON body (vLLM's `openai-embeddings`).
    OpenaiEmbeddings,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::OpenaiCompletions => "openai-completions",
            Backend::OpenaiChat => "openai-chat",
            Backend::OpenaiResponses => "openai-responses",
            Backend::AnthropicMessages => "anthropic-messages",
            Backend::OpenaiEmbeddings => "openai-embeddings",
        }
    }

    pub fn default_endpoint(self) -> &'static str {
        match self {
            Backend::OpenaiCompletions => "/v1/completions",
            Backend::OpenaiChat => "/v1/chat/completions",
            Backend::OpenaiResponses => "/v1/responses",
            Backend::AnthropicMessages => "/v1/messages",
            Backend::OpenaiEmbeddings => "/v1/embeddings",
        }
    }

    /// The API's name in messages.
    pub fn api(self) -> &'static str {
        match self {
            Backend::OpenaiCompletions => "OpenAI completions",
            Backend::OpenaiChat => "OpenAI chat completions",
            Backend::OpenaiResponses => "OpenAI Responses",
            Backend::AnthropicMessages => "Anthropic Messages",
            Backend::OpenaiEmbeddings => "OpenAI embeddings",
        }
    }

    /// Whether the request body takes vLLM's `ignore_eos` (the Responses and Messages
    /// APIs have no such field; servers that check their fields refuse it; an embedding
    /// generates nothing).
    pub fn takes_ignore_eos(self) -> bool {
        matches!(self, Backend::OpenaiCompletions | Backend::OpenaiChat)
    }

    /// Whether the prompt goes in a user message that the server wraps in the model's chat
    /// template (chat completions, Responses, Messages), not as the raw prompt text.
    pub fn sends_messages(self) -> bool {
        matches!(
            self,
            Backend::OpenaiChat | Backend::OpenaiResponses | Backend::AnthropicMessages
        )
    }

    /// Whether the requests are pooling requests (vLLM's `TaskType.POOLING`): one JSON
    /// answer, nothing generated, so no TTFT, TPOT or ITL; E2EL and input counts only.
    pub fn pooling(self) -> bool {
        matches!(self, Backend::OpenaiEmbeddings)
    }
}
