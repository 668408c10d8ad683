//! `POST /v1/chat/completions/batch` (vLLM's batched chat): `messages` is a list of
//! conversations; each is checked and rendered as a chat request of its own (every chat
//! check; an error inside conversation `i` names `messages[i]…`), all are sent to the
//! engine together, and the answer is one chat completion whose choice `i` answers
//! conversation `i`. Not streamed, no tool calls, one choice per conversation. Mirrors
//! `server/routes/chat_batch.py`. Behaviour: docs/api.md, "Batched chat".

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::response::Response;
use serde_json::{Map, Value};

use crate::dispatch::{generate, AcceptedRequest};
use crate::edge::error::ApiError;
use crate::openai::{ChatChunk, ChatCompletion, Header, Usage};
use crate::output::choice::ChatChoiceState;
use crate::output::generation::Piece;
use crate::output::response::Shapes;
use crate::output::sse;
use crate::state::{AppState, SharedState};
use crate::validate::params;
use crate::validate::prompt::{self, Prompt};

pub async fn handle(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    generate(&state, body, build, BatchShapes::new).await
}

/// `messages`: a non-empty list (at most `limit`: `--max-batch-prompts`) of non-empty
/// lists of messages (the messages themselves are the chat checks' business).
pub fn conversations(map: &Map<String, Value>, limit: usize) -> Result<&[Value], ApiError> {
    let batch = match map.get("messages") {
        None | Some(Value::Null) => {
            return Err(ApiError::bad("messages", "`messages` is required"));
        }
        Some(Value::Array(batch)) => batch,
        Some(_) => {
            return Err(ApiError::bad(
                "messages",
                "invalid value for `messages`: expected a list of conversations, each a \
                 list of messages",
            ));
        }
    };
    if batch.is_empty() {
        return Err(ApiError::bad("messages", "`messages` must not be empty"));
    }
    if batch.len() > limit {
        return Err(ApiError::bad(
            "messages",
            format!(
                "`messages` holds {} conversations; at most {limit} are allowed per request \
                 (--max-batch-prompts {limit})",
                batch.len()
            ),
        ));
    }
    for (i, conversation) in batch.iter().enumerate() {
        let param = format!("messages[{i}]");
        match conversation.as_array() {
            None => {
                let message = format!("invalid value for `{param}`: expected a list of messages");
                return Err(ApiError::bad(param, message));
            }
            Some(list) if list.is_empty() => {
                let message = format!("`{param}` must not be empty");
                return Err(ApiError::bad(param, message));
            }
            Some(_) => {}
        }
    }
    Ok(batch)
}

/// What a batch cannot do, as vLLM's batch request: stream, `n` > 1, tool calls (its
/// `tool_choice` is "none"), and the top-level `prompt_logprobs` of one prompt.
pub fn check_batch_limits(map: &Map<String, Value>) -> Result<(), ApiError> {
    if map.get("stream") == Some(&Value::Bool(true)) {
        return Err(ApiError::bad(
            "stream",
            "batch chat completions are not streamed: send `stream` false or leave it out",
        ));
    }
    if let Some(n) = map.get("n").and_then(Value::as_i64).filter(|&n| n != 1) {
        return Err(ApiError::bad(
            "n",
            format!(
                "batch chat completions make one choice per conversation: `n` must be 1, \
                 got {n}"
            ),
        ));
    }
    if map
        .get("tool_choice")
        .is_some_and(|c| !c.is_null() && c.as_str() != Some("none"))
    {
        return Err(ApiError::bad(
            "tool_choice",
            "batch chat completions make no tool calls: `tool_choice` must be \"none\" (the \
             default here); `tools` still reach the chat template",
        ));
    }
    if map.get("prompt_logprobs").is_some_and(|p| !p.is_null()) {
        return Err(ApiError::bad(
            "prompt_logprobs",
            "`prompt_logprobs` is not supported by batch chat completions",
        ));
    }
    Ok(())
}

/// A chat error as the batch names it: `messages…` of conversation `index` is
/// `messages[index]…` (in `param` and where the message quotes it); other fields keep
/// their names.
pub fn in_conversation(err: ApiError, index: usize) -> ApiError {
    match err {
        ApiError::BadRequest {
            message,
            param: Some(param),
        } if param == "messages" || param.starts_with("messages[") => {
            let renamed = format!("messages[{index}]{}", &param["messages".len()..]);
            ApiError::BadRequest {
                message: message.replace(&format!("`{param}`"), &format!("`{renamed}`")),
                param: Some(renamed),
            }
        }
        other => other,
    }
}

/// One chat prompt per conversation, checked in order: the JSON object, `messages`, the
/// batch's limits, then each conversation's chat checks.
async fn build(state: &SharedState, body: Bytes) -> Result<Vec<Prompt>, ApiError> {
    let map = params::parse_object(&body)?;
    let batch = conversations(&map, state.options.max_batch_prompts)?.to_vec();
    check_batch_limits(&map)?;
    // Each conversation goes where the body has `messages` (body order is check order).
    let mut base = map;
    base.insert("messages".into(), Value::Null);
    if base.get("tool_choice").map_or(true, Value::is_null) {
        base.insert("tool_choice".into(), Value::String("none".into()));
    }
    let mut prompts = Vec::with_capacity(batch.len());
    for (i, conversation) in batch.into_iter().enumerate() {
        let mut single = base.clone();
        single.insert("messages".into(), conversation);
        let prompt = prompt::chat_object(state, single, body.len())
            .await
            .map_err(|err| in_conversation(err, i))?;
        prompts.push(prompt);
    }
    Ok(prompts)
}

/// The batch's response: choice `i` (one per conversation) with its conversation's echo.
pub struct BatchShapes {
    id: String,
    created: u64,
    model: Arc<str>,
    choices: Vec<ChatChoiceState>,
    echoes: Vec<Option<String>>,
}

impl BatchShapes {
    pub fn new(job: &AcceptedRequest, state: &AppState) -> Result<Self, ApiError> {
        let reasoning = state
            .options
            .reasoning_parser
            .and_then(crate::parsers::reasoning::markers_of);
        let mut choices = Vec::with_capacity(job.prompts.len());
        let mut echoes = Vec::with_capacity(job.prompts.len());
        for (i, prompt) in job.prompts.iter().enumerate() {
            let chat = prompt
                .chat
                .as_ref()
                .ok_or_else(|| ApiError::Internal("a batch prompt without chat".into()))?;
            let top = prompt.settings.sampling.logprobs.map(|k| k as usize);
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            let texts = Arc::clone(&state.token_texts);
            choices.push(ChatChoiceState::new(index, chat, reasoning, top, texts));
            echoes.push(chat.echo.clone());
        }
        Ok(Self {
            id: job.id.clone(),
            created: job.created,
            model: state.model_name(),
            choices,
            echoes,
        })
    }

    fn header(&self, object: &'static str) -> Header<'_> {
        Header {
            id: &self.id,
            object,
            created: self.created,
            model: &self.model,
        }
    }

    /// `usage` with every choice's reasoning tokens (when the server counts them).
    fn with_reasoning(&self, usage: Usage) -> Usage {
        ChatChoiceState::usage_of(&self.choices, usage)
    }
}

impl Shapes for BatchShapes {
    /// Never streamed (`stream` true is refused): nothing before the body.
    fn start(&mut self, _buf: &mut Vec<u8>) {}

    fn step(&mut self, index: usize, piece: Piece, _usage: Usage, _buf: &mut Vec<u8>) {
        self.absorb(index, piece);
    }

    fn absorb(&mut self, index: usize, piece: Piece) {
        if let Some(choice) = self.choices.get_mut(index) {
            choice.step(piece);
        }
    }

    fn usage(&self, buf: &mut Vec<u8>, usage: Usage) {
        let chunk = ChatChunk {
            header: self.header("chat.completion.chunk"),
            choices: Vec::new(),
            usage: Some(self.with_reasoning(usage)),
            prompt_logprobs: None,
            prompt_token_ids: None,
        };
        sse::push_event(buf, &chunk);
    }

    fn body(self, usage: Usage) -> Vec<u8> {
        let usage = self.with_reasoning(usage);
        let choices = self
            .choices
            .into_iter()
            .zip(&self.echoes)
            .map(|(state, echo)| {
                let mut choice = state.choice();
                if let Some(echo) = echo {
                    let content = choice.message.content.take().unwrap_or_default();
                    choice.message.content = Some(format!("{echo}{content}"));
                }
                choice
            })
            .collect();
        let body = ChatCompletion {
            header: Header {
                id: &self.id,
                object: "chat.completion",
                created: self.created,
                model: &self.model,
            },
            choices,
            usage,
            prompt_logprobs: None,
            prompt_token_ids: None,
        };
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
