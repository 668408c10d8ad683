//! `POST /tokenize` and `POST /detokenize` (vLLM's shapes): the body checked (keys, types,
//! values), a completion-style or chat-style prompt tokenized, or token ids decoded; and
//! `GET /tokenizer_info`. Mirrors `server/routes/tokenize.py`. Behaviour: docs/api.md,
//! "/tokenize, /detokenize", "/tokenizer_info".

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{Map, Value};
use vrs_text::ChatTemplateInput;

use crate::edge::body::request_body;
use crate::edge::error::text_error;
use crate::edge::error::ApiError;
use crate::openai::{ChatMessage, Detokenized, Tokenized};
use crate::parsers::tools::check_tools;
use crate::state::SharedState;
use crate::text::offload;
use crate::validate::params;
use crate::validate::prompt::{message_json, TextModel};

const COMPLETION_KEYS: &[&str] = &["model", "prompt", "add_special_tokens", "return_token_strs"];
const CHAT_KEYS: &[&str] = &[
    "model",
    "messages",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "chat_template_kwargs",
    "tools",
    "return_token_strs",
];
const DETOKENIZE_KEYS: &[&str] = &["model", "tokens"];

#[derive(Debug, Default, Deserialize)]
struct TokenizeCompletion {
    model: Option<String>,
    prompt: Option<String>,
    add_special_tokens: Option<bool>,
    return_token_strs: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct TokenizeChat {
    model: Option<String>,
    messages: Option<Vec<ChatMessage>>,
    add_generation_prompt: Option<bool>,
    continue_final_message: Option<bool>,
    add_special_tokens: Option<bool>,
    chat_template_kwargs: Option<Map<String, Value>>,
    return_token_strs: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
struct Detokenize {
    model: Option<String>,
    #[serde(default, deserialize_with = "crate::openai::ints::opt_u32s")]
    tokens: Option<Vec<u32>>,
}

/// `GET /tokenizer_info` (routed with `--enable-tokenizer-info-endpoint` only): the body
/// [`crate::text::tokenizer_info`] made at start-up.
pub async fn tokenizer_info(State(state): State<SharedState>) -> Response {
    match &state.options.tokenizer_info {
        Some(body) => ([(header::CONTENT_TYPE, "application/json")], body.clone()).into_response(),
        None => ApiError::RouteNotFound("/tokenizer_info".into()).into_response(),
    }
}

/// The body as a JSON object whose keys are all in `keys`.
fn object(body: &[u8], keys: &[&str]) -> Result<Value, ApiError> {
    let map = params::parse_object(body)?;
    let unknown = map
        .keys()
        .map(String::as_str)
        .filter(|k| !keys.contains(k))
        .collect();
    params::refuse_unknown(unknown)?;
    Ok(Value::Object(map))
}

pub async fn tokenize(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match tokenized(&state, body).await {
        Ok(answer) => Json(answer).into_response(),
        Err(err) => err.into_response(),
    }
}

async fn tokenized(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Tokenized, ApiError> {
    let body = request_body(body, state.options.max_request_body)?;
    let chat = params::parse_object(&body)?.contains_key("messages");
    let value = object(&body, if chat { CHAT_KEYS } else { COMPLETION_KEYS })?;
    let (text, special, strs) = if chat {
        let mut request: TokenizeChat = params::fields(&value)?;
        state.check_model(request.model.as_deref())?;
        let messages = request.messages.take();
        let input = chat_input(state, messages, &request, value.get("tools"))?;
        let st = Arc::clone(state);
        let text = offload(body.len(), move || {
            let template = st
                .template()
                .ok_or_else(|| ApiError::Internal("no chat template".into()))?;
            template.render(&input).map_err(text_error)
        })
        .await?;
        let special = request.add_special_tokens.unwrap_or(false);
        (text, special, request.return_token_strs.unwrap_or(false))
    } else {
        let request: TokenizeCompletion = params::fields(&value)?;
        state.check_model(request.model.as_deref())?;
        let text = request
            .prompt
            .ok_or_else(|| ApiError::bad("prompt", "`prompt` is required"))?;
        let special = request.add_special_tokens.unwrap_or(true);
        (text, special, request.return_token_strs.unwrap_or(false))
    };
    let st = Arc::clone(state);
    let tokens = offload(text.len(), move || {
        st.tokenizer.encode(&text, special).map_err(text_error)
    })
    .await?;
    let token_strs = strs.then(|| {
        tokens
            .iter()
            .map(|&id| state.tokenizer.id_to_token(id).unwrap_or_default())
            .collect()
    });
    Ok(Tokenized {
        count: tokens.len(),
        max_model_len: state.max_model_len,
        tokens,
        token_strs,
    })
}

/// The template input of a chat-style /tokenize (the same checks as a chat request).
fn chat_input(
    state: &SharedState,
    messages: Option<Vec<ChatMessage>>,
    request: &TokenizeChat,
    tools: Option<&Value>,
) -> Result<ChatTemplateInput, ApiError> {
    let messages = match messages {
        None => return Err(ApiError::bad("messages", "`messages` is required")),
        Some(m) if m.is_empty() => {
            return Err(ApiError::bad("messages", "`messages` must not be empty"))
        }
        Some(m) => m,
    };
    if state.template.is_none() {
        return Err(ApiError::bad_request(
            crate::validate::prompt::NO_CHAT_TEMPLATE,
        ));
    }
    let messages = messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| message_json(i, m))
        .collect::<Result<_, _>>()?;
    let continue_final = request.continue_final_message.unwrap_or(false);
    Ok(ChatTemplateInput {
        messages,
        tools: check_tools(tools)?,
        documents: None,
        add_generation_prompt: request.add_generation_prompt.unwrap_or(!continue_final),
        continue_final_message: continue_final,
        kwargs: request.chat_template_kwargs.clone().unwrap_or_default(),
    })
}

pub async fn detokenize(
    State(state): State<SharedState>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    match detokenized(&state, body).await {
        Ok(answer) => Json(answer).into_response(),
        Err(err) => err.into_response(),
    }
}

async fn detokenized(
    state: &SharedState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Detokenized, ApiError> {
    let body = request_body(body, state.options.max_request_body)?;
    let request: Detokenize = params::fields(&object(&body, DETOKENIZE_KEYS)?)?;
    let tokens = request
        .tokens
        .ok_or_else(|| ApiError::bad("tokens", "`tokens` is required"))?;
    let vocab = state.vocab_size;
    if let Some(bad) = tokens.iter().find(|&&id| u64::from(id) >= vocab) {
        return Err(ApiError::bad(
            "tokens",
            format!("token id {bad} in `tokens` is out of the vocabulary (size {vocab})"),
        ));
    }
    state.check_model(request.model.as_deref())?;
    let st = Arc::clone(state);
    let prompt = offload(tokens.len() * 4, move || {
        st.tokenizer.decode(&tokens, false).map_err(text_error)
    })
    .await?;
    Ok(Detokenized { prompt })
}
