//! `POST /v1/chat/completions`, and loading the model's text assets.

use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use vrs_text::{ChatTemplate, ChatTemplateInput, TextError, Tokenizer};

use crate::error::ApiError;
use crate::job::{self, Job};
use crate::openai::{
    AssistantMessage, ChatChoice, ChatChunk, ChatChunkChoice, ChatCompletion, ChatFields,
    ChatMessage, CommonFields, Delta, Header, MessageContent, Usage,
};
use crate::params::{self, Endpoint};
use crate::response::Format;
use crate::server::{body_bytes, SharedState};
use crate::sse;

/// The compiled chat template (absent when the model has none).
pub type Template = ChatTemplate;

/// Loads the tokenizer and the chat template (from `override_path` when given).
pub fn load_text(
    dir: &Path,
    override_path: Option<&str>,
) -> Result<(Tokenizer, Option<Template>), String> {
    let tokenizer =
        Tokenizer::from_dir(dir).map_err(|e| format!("cannot load the tokenizer: {e}"))?;
    match ChatTemplate::from_config(tokenizer.config(), override_path.map(Path::new)) {
        Ok(template) => Ok((tokenizer, Some(template))),
        Err(TextError::NoChatTemplate(message)) => {
            tracing::warn!("{message}");
            Ok((tokenizer, None))
        }
        Err(e) => Err(format!("cannot load the chat template: {e}")),
    }
}

/// Maps a text-layer error: the user's input or template → 400, anything else → 500.
pub fn text_error(err: TextError) -> ApiError {
    if err.is_user_error() {
        ApiError::bad_request(err.to_string())
    } else {
        ApiError::Internal(err.to_string())
    }
}

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match prepare(&state, body).await {
        Ok(job) => {
            let format = ChatFormat {
                id: job.id.clone(),
                created: job.created,
                model: job::model_name(&state),
            };
            job.respond(&state, format).await
        }
        Err(err) => err.into_response(),
    }
}

async fn prepare(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Job, ApiError> {
    let body = body_bytes(body)?;
    let map = params::parse_object(&body)?;
    params::check_keys(&map, Endpoint::Chat)?;
    let value = Value::Object(map);
    let common: CommonFields = params::fields(&value)?;
    let chat: ChatFields = params::fields(&value)?;
    let max_override = chat
        .max_completion_tokens
        .map(|v| ("max_completion_tokens", v));
    let generation = params::validate(common, max_override, state.vocab_size)?;
    state.check_model(generation.model.as_deref())?;
    let messages = match chat.messages {
        None => return Err(ApiError::bad("messages", "`messages` is required")),
        Some(m) if m.is_empty() => {
            return Err(ApiError::bad("messages", "`messages` must not be empty"))
        }
        Some(m) => m,
    };
    if state.template.is_none() {
        return Err(ApiError::bad_request(
            "this model has no chat template, so /v1/chat/completions is unavailable; \
             start the server with --chat-template or use /v1/completions",
        ));
    }
    let continue_final = chat.continue_final_message.unwrap_or(false);
    let input = ChatTemplateInput {
        messages: messages
            .into_iter()
            .enumerate()
            .map(|(i, m)| message_json(i, m))
            .collect::<Result<_, _>>()?,
        tools: None,
        documents: None,
        add_generation_prompt: chat.add_generation_prompt.unwrap_or(!continue_final),
        continue_final_message: continue_final,
        kwargs: chat.chat_template_kwargs.unwrap_or_default(),
    };
    let st = Arc::clone(state);
    let prompt_ids = job::offload(body.len(), move || {
        let template = st
            .template
            .as_ref()
            .ok_or_else(|| ApiError::Internal("no chat template".into()))?;
        let prompt = template.render(&input).map_err(text_error)?;
        st.tokenizer.encode(&prompt, false).map_err(text_error)
    })
    .await?;
    Job::new(state, generation, prompt_ids, "messages", "chatcmpl")
}

/// A message as the template sees it: text parts joined, absent fields left out.
fn message_json(index: usize, message: ChatMessage) -> Result<Value, ApiError> {
    let mut out = Map::new();
    out.insert("role".into(), Value::String(message.role));
    let content = match message.content {
        None => Value::Null,
        Some(MessageContent::Text(text)) => Value::String(text),
        Some(MessageContent::Parts(parts)) => {
            let mut texts = Vec::with_capacity(parts.len());
            for (j, part) in parts.into_iter().enumerate() {
                let param = format!("messages[{index}].content[{j}]");
                match (part.kind.as_str(), part.text) {
                    ("text", Some(text)) => texts.push(text),
                    ("text", None) => {
                        return Err(ApiError::bad(param, "a text content part needs `text`"))
                    }
                    (other, _) => {
                        return Err(ApiError::bad(
                            param,
                            format!("content parts of type `{other}` are not supported"),
                        ))
                    }
                }
            }
            Value::String(texts.join("\n"))
        }
    };
    out.insert("content".into(), content);
    if let Some(name) = message.name {
        out.insert("name".into(), Value::String(name));
    }
    if let Some(calls) = message.tool_calls {
        out.insert("tool_calls".into(), Value::Array(calls));
    }
    if let Some(id) = message.tool_call_id {
        out.insert("tool_call_id".into(), Value::String(id));
    }
    if let Some(reasoning) = message.reasoning_content {
        out.insert("reasoning_content".into(), Value::String(reasoning));
    }
    Ok(Value::Object(out))
}

/// Chat response shapes.
pub struct ChatFormat {
    pub id: String,
    pub created: u64,
    pub model: Arc<str>,
}

impl ChatFormat {
    fn header(&self, object: &'static str) -> Header<'_> {
        Header {
            id: &self.id,
            object,
            created: self.created,
            model: &self.model,
        }
    }

    fn chunk(&self, buf: &mut Vec<u8>, delta: Delta<'_>, finish: Option<&str>) {
        let choices = [ChatChunkChoice {
            index: 0,
            delta,
            logprobs: None,
            finish_reason: finish,
        }];
        let chunk = ChatChunk {
            header: self.header("chat.completion.chunk"),
            choices: &choices,
            usage: None,
        };
        sse::push_event(buf, &chunk);
    }
}

impl Format for ChatFormat {
    fn start(&self, buf: &mut Vec<u8>) {
        self.chunk(
            buf,
            Delta {
                role: Some("assistant"),
                content: Some(""),
            },
            None,
        );
    }

    fn delta(&self, buf: &mut Vec<u8>, text: &str, finish: Option<&str>) {
        let content = (!text.is_empty()).then_some(text);
        self.chunk(
            buf,
            Delta {
                role: None,
                content,
            },
            finish,
        );
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        let chunk = ChatChunk {
            header: self.header("chat.completion.chunk"),
            choices: &[],
            usage: Some(usage),
        };
        sse::push_event(buf, &chunk);
    }

    fn complete(&self, text: &str, finish: &str, usage: Usage) -> Vec<u8> {
        let body = ChatCompletion {
            header: self.header("chat.completion"),
            choices: [ChatChoice {
                index: 0,
                message: AssistantMessage {
                    role: "assistant",
                    content: text,
                },
                logprobs: None,
                finish_reason: finish,
            }],
            usage,
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}
