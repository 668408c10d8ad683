//! OpenAI request and response shapes (the subset this server implements).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

// ------------------------------------------------------------------------- requests

/// Fields shared by chat and completions requests.
#[derive(Debug, Default, Deserialize)]
pub struct CommonFields {
    pub model: Option<String>,
    pub max_tokens: Option<i64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<i64>,
    pub min_p: Option<f64>,
    pub seed: Option<i64>,
    pub stop: Option<Stop>,
    pub stop_token_ids: Option<Vec<u32>>,
    pub ignore_eos: Option<bool>,
    pub min_tokens: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub repetition_penalty: Option<f64>,
    pub skip_special_tokens: Option<bool>,
    pub stream: Option<bool>,
    pub stream_options: Option<StreamOptions>,
    pub user: Option<String>,
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
];

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
    pub max_completion_tokens: Option<i64>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
}

pub const CHAT_KEYS: &[&str] = &[
    "messages",
    "max_completion_tokens",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
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
    pub prompt: Option<Prompt>,
}

pub const COMPLETION_KEYS: &[&str] = &["prompt"];

/// `prompt`: text, token ids, or a batch of one of either.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(
    untagged,
    expecting = "a string, a list of token ids, or a list with one string"
)]
pub enum Prompt {
    Text(String),
    Tokens(Vec<u32>),
    Texts(Vec<String>),
    TokenLists(Vec<Vec<u32>>),
}

// ------------------------------------------------------------------------ responses

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

impl Usage {
    pub fn new(prompt_tokens: u32, completion_tokens: u32) -> Self {
        Self {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
        }
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
    pub choices: [ChatChoice<'a>; 1],
    pub usage: Usage,
}

#[derive(Debug, Serialize)]
pub struct ChatChoice<'a> {
    pub index: u32,
    pub message: AssistantMessage<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: &'a str,
}

#[derive(Debug, Serialize)]
pub struct AssistantMessage<'a> {
    pub role: &'static str,
    pub content: &'a str,
}

#[derive(Debug, Serialize)]
pub struct ChatChunk<'a> {
    #[serde(flatten)]
    pub header: Header<'a>,
    pub choices: &'a [ChatChunkChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Debug, Serialize)]
pub struct ChatChunkChoice<'a> {
    pub index: u32,
    pub delta: Delta<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
}

#[derive(Debug, Default, Serialize)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<&'a str>,
}

#[derive(Debug, Serialize)]
pub struct Completion<'a> {
    #[serde(flatten)]
    pub header: Header<'a>,
    pub choices: &'a [CompletionChoice<'a>],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

#[derive(Debug, Serialize)]
pub struct CompletionChoice<'a> {
    pub index: u32,
    pub text: &'a str,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
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
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompt_forms() {
        let p = |v: Value| serde_json::from_value::<Prompt>(v);
        assert_eq!(p(json!("hi")).unwrap(), Prompt::Text("hi".into()));
        assert_eq!(p(json!([1, 2])).unwrap(), Prompt::Tokens(vec![1, 2]));
        assert_eq!(p(json!(["a"])).unwrap(), Prompt::Texts(vec!["a".into()]));
        assert_eq!(p(json!([[3]])).unwrap(), Prompt::TokenLists(vec![vec![3]]));
        let err = p(json!(5)).unwrap_err().to_string();
        assert!(err.contains("a string, a list of token ids"), "{err}");
        assert!(p(json!([-1])).is_err());
    }

    #[test]
    fn message_content_forms() {
        let m: ChatMessage = serde_json::from_value(json!({
            "role": "user", "content": [{"type": "text", "text": "a"}]
        }))
        .unwrap();
        assert_eq!(
            m.content,
            Some(MessageContent::Parts(vec![ContentPart {
                kind: "text".into(),
                text: Some("a".into())
            }]))
        );
        assert!(serde_json::from_value::<ChatMessage>(json!({"role": "user", "x": 1})).is_err());
        assert!(serde_json::from_value::<ChatMessage>(json!({"content": "hi"})).is_err());
    }

    #[test]
    fn chunk_shapes() {
        let header = Header {
            id: "chatcmpl-1",
            object: "chat.completion.chunk",
            created: 7,
            model: "m",
        };
        let choices = [ChatChunkChoice {
            index: 0,
            delta: Delta {
                role: Some("assistant"),
                content: Some(""),
            },
            logprobs: None,
            finish_reason: None,
        }];
        let v = serde_json::to_value(ChatChunk {
            header,
            choices: &choices,
            usage: None,
        })
        .unwrap();
        assert_eq!(
            v,
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7,
                   "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant",
                   "content": ""}, "logprobs": null, "finish_reason": null}]})
        );
        let header = Header {
            id: "cmpl-1",
            object: "text_completion",
            created: 7,
            model: "m",
        };
        let v = serde_json::to_value(Completion {
            header,
            choices: &[],
            usage: Some(Usage::new(3, 4)),
        })
        .unwrap();
        assert_eq!(
            v["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7})
        );
        assert_eq!(v["choices"], json!([]));
    }
}
