//! A pooling request's body and prompts (vLLM's `PoolingBasicRequestMixin`,
//! `CompletionRequestMixin`, `ChatRequestMixin`): the keys checked, `input` in each of
//! its forms (a string, strings, token ids, token-id lists, or chat `messages` rendered
//! with the chat template), tokenized on the blocking pool, `truncate_prompt_tokens`
//! applied, every prompt checked against the context length.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value};
use vrs_text::ChatTemplateInput;

use crate::edge::error::{text_error, ApiError};
use crate::openai::ChatMessage;
use crate::state::{AppState, SharedState};
use crate::text::offload;
use crate::validate::params;
use crate::validate::prompt::{message_json, TextModel, NO_CHAT_TEMPLATE};

/// The fields every pooling request may give.
pub const BASIC_KEYS: &[&str] = &[
    "model",
    "user",
    "truncate_prompt_tokens",
    "truncation_side",
    "priority",
    "cache_salt",
];
/// A completion-style request's own fields.
pub const INPUT_KEYS: &[&str] = &["input", "add_special_tokens"];
/// A chat-style request's own fields.
pub const CHAT_KEYS: &[&str] = &[
    "messages",
    "add_generation_prompt",
    "continue_final_message",
    "add_special_tokens",
    "chat_template_kwargs",
];

/// The fields of [`BASIC_KEYS`], and the prompt's options.
#[derive(Debug, Default, Deserialize)]
pub struct Basic {
    pub model: Option<String>,
    pub user: Option<String>,
    #[serde(default, deserialize_with = "crate::openai::ints::opt_i64")]
    pub truncate_prompt_tokens: Option<i64>,
    pub truncation_side: Option<String>,
    pub add_special_tokens: Option<bool>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
    pub messages: Option<Vec<ChatMessage>>,
}

/// Where a pooling request's prompts come from.
#[derive(Debug, Clone)]
pub enum Input {
    Texts(Vec<String>),
    Ids(Vec<Vec<u32>>),
    /// One conversation, rendered with the chat template.
    Chat(ChatTemplateInput),
}

/// The body as an object: its keys checked against `own` (with [`BASIC_KEYS`], and
/// [`CHAT_KEYS`] or [`INPUT_KEYS`] when `prompted`: by `messages`, or a chat-style
/// `input`, a list of messages, which moves to `messages`), then [`Basic`]'s fields.
pub fn parse(body: &[u8], own: &[&str], prompted: bool) -> Result<(Value, Basic), ApiError> {
    let mut map = params::parse_object(body)?;
    let chat = prompted && (map.contains_key("messages") || is_chat(map.get("input")));
    if chat && !map.contains_key("messages") {
        if let Some(input) = map.remove("input") {
            map.insert("messages".into(), input);
        }
    }
    let prompt_keys: &[&str] = match (prompted, chat) {
        (false, _) => &[],
        (true, true) => CHAT_KEYS,
        (true, false) => INPUT_KEYS,
    };
    let unknown = map
        .keys()
        .map(String::as_str)
        .filter(|k| !BASIC_KEYS.contains(k) && !own.contains(k) && !prompt_keys.contains(k))
        .collect();
    params::refuse_unknown(unknown)?;
    let value = Value::Object(map);
    let basic: Basic = params::fields(&value)?;
    if let Some(side) = basic.truncation_side.as_deref() {
        if side != "left" && side != "right" {
            return Err(ApiError::bad(
                "truncation_side",
                format!("`truncation_side` must be \"left\" or \"right\", got {side:?}"),
            ));
        }
    }
    Ok((value, basic))
}

fn is_chat(input: Option<&Value>) -> bool {
    matches!(input, Some(Value::Array(items)) if !items.is_empty()
        && items.iter().all(|m| m.get("role").is_some_and(Value::is_string)))
}

/// The request's input: `messages` (checked and made the template's input), else `input`.
pub fn input(state: &AppState, value: &Value, basic: &mut Basic) -> Result<Input, ApiError> {
    match basic.messages.take() {
        Some(messages) => chat(state, messages, basic).map(Input::Chat),
        None => texts_or_ids(value.get("input"), "input"),
    }
}

/// A string, strings, token ids or token-id lists: `field` as [`Input`].
pub fn texts_or_ids(value: Option<&Value>, field: &str) -> Result<Input, ApiError> {
    let shape = || {
        ApiError::bad(
            field,
            format!(
                "`{field}` must be a string, a list of strings, a list of token ids or a list \
                 of token-id lists"
            ),
        )
    };
    let items = match value {
        None | Some(Value::Null) => {
            return Err(ApiError::bad(field, format!("`{field}` is required")))
        }
        Some(Value::String(s)) => return Ok(Input::Texts(vec![s.clone()])),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(shape()),
    };
    if items.is_empty() {
        return Err(ApiError::bad(field, format!("`{field}` must not be empty")));
    }
    if items.iter().all(Value::is_string) {
        let texts = items.iter().filter_map(Value::as_str).map(str::to_owned);
        return Ok(Input::Texts(texts.collect()));
    }
    let ids = |v: &Value| -> Option<Vec<u32>> {
        v.as_array()?
            .iter()
            .map(|id| id.as_u64().and_then(|id| u32::try_from(id).ok()))
            .collect()
    };
    if items.iter().all(Value::is_number) {
        return ids(&Value::Array(items.clone()))
            .map(|one| Input::Ids(vec![one]))
            .ok_or_else(shape);
    }
    items
        .iter()
        .map(ids)
        .collect::<Option<Vec<_>>>()
        .map(Input::Ids)
        .ok_or_else(shape)
}

/// The template input of a chat-style request (the chat route's checks on `messages`).
fn chat(
    state: &AppState,
    messages: Vec<ChatMessage>,
    basic: &Basic,
) -> Result<ChatTemplateInput, ApiError> {
    if messages.is_empty() {
        return Err(ApiError::bad("messages", "`messages` must not be empty"));
    }
    if state.template.is_none() {
        return Err(ApiError::bad_request(NO_CHAT_TEMPLATE));
    }
    let continue_final = basic.continue_final_message.unwrap_or(false);
    let generation = basic.add_generation_prompt.unwrap_or(false);
    if continue_final && generation {
        return Err(ApiError::bad(
            "continue_final_message",
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        ));
    }
    let messages = messages
        .into_iter()
        .enumerate()
        .map(|(i, m)| message_json(i, m))
        .collect::<Result<_, _>>()?;
    Ok(ChatTemplateInput {
        messages,
        tools: None,
        documents: None,
        add_generation_prompt: generation,
        continue_final_message: continue_final,
        kwargs: basic.chat_template_kwargs.clone().unwrap_or_default(),
    })
}

/// How prompts are cut: keep `keep` tokens at most, the last ones when `left`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Truncation {
    pub keep: Option<usize>,
    pub left: bool,
}

impl Truncation {
    /// `truncate_prompt_tokens` (-1: the context length) and `truncation_side` (unset:
    /// the tokenizer's), checked against the context length.
    pub fn of(state: &AppState, basic: &Basic) -> Result<Self, ApiError> {
        let left = match basic.truncation_side.as_deref() {
            Some(side) => side == "left",
            None => state.tokenizer.config().truncation_side.as_deref() == Some("left"),
        };
        let max = state.max_model_len;
        let keep = match basic.truncate_prompt_tokens {
            None => None,
            Some(-1) => Some(usize::try_from(max).unwrap_or(usize::MAX)),
            Some(k) if k < -1 => {
                return Err(ApiError::bad(
                    "truncate_prompt_tokens",
                    format!("`truncate_prompt_tokens` must be -1 or at least 0, got {k}"),
                ))
            }
            Some(k) if u64::try_from(k).is_ok_and(|k| k > max) => {
                return Err(ApiError::bad(
                    "truncate_prompt_tokens",
                    format!(
                        "truncate_prompt_tokens={k} cannot be greater than max_model_len = \
                         {max}. Please request a smaller truncation size."
                    ),
                ))
            }
            Some(k) => usize::try_from(k).ok(),
        };
        Ok(Self { keep, left })
    }

    /// `ids` cut to at most `keep` tokens.
    pub fn apply(self, mut ids: Vec<u32>) -> Vec<u32> {
        match self.keep {
            Some(keep) if ids.len() > keep => {
                if self.left {
                    ids.drain(..ids.len() - keep);
                } else {
                    ids.truncate(keep);
                }
                ids
            }
            _ => ids,
        }
    }
}

/// The token ids of `input`'s prompts: rendered and tokenized on the blocking pool
/// (`special`: `add_special_tokens`), truncated, and checked (ids in the vocabulary, no
/// empty prompt, none longer than the context length; `field` names the input).
pub async fn prompts(
    state: &SharedState,
    input: Input,
    special: bool,
    cut: Truncation,
    field: &str,
) -> Result<Vec<Vec<u32>>, ApiError> {
    let ids = match input {
        Input::Ids(ids) => ids,
        Input::Texts(texts) => {
            let st = Arc::clone(state);
            let size = texts.iter().map(String::len).sum();
            offload(size, move || {
                texts
                    .iter()
                    .map(|t| st.tokenizer.encode(t, special).map_err(text_error))
                    .collect()
            })
            .await?
        }
        Input::Chat(chat) => {
            let st = Arc::clone(state);
            let size = chat.messages.iter().map(|m| m.to_string().len()).sum();
            offload(size, move || {
                let template = st
                    .template()
                    .ok_or_else(|| ApiError::bad_request(NO_CHAT_TEMPLATE))?;
                let text = template.render(&chat).map_err(text_error)?;
                Ok(vec![st
                    .tokenizer
                    .encode(&text, special)
                    .map_err(text_error)?])
            })
            .await?
        }
    };
    ids.into_iter()
        .map(|ids| check(state, cut.apply(ids), field))
        .collect()
}

/// `ids` if every id is in the vocabulary and there are 1 to `max_model_len` of them.
pub fn check(state: &AppState, ids: Vec<u32>, field: &str) -> Result<Vec<u32>, ApiError> {
    let vocab = state.vocab_size;
    if let Some(bad) = ids.iter().find(|&&id| u64::from(id) >= vocab) {
        return Err(ApiError::bad(
            field,
            format!("token id {bad} in `{field}` is out of the vocabulary (size {vocab})"),
        ));
    }
    if ids.is_empty() {
        return Err(ApiError::bad(
            field,
            format!("a prompt in `{field}` is empty (no tokens)"),
        ));
    }
    let max = state.max_model_len;
    if ids.len() as u64 > max {
        return Err(ApiError::bad(
            field,
            format!(
                "This model's maximum context length is {max} tokens. However, your prompt \
                 contains {} input tokens, which exceeds this limit even without any output \
                 tokens. Please reduce the length of the input prompt.",
                ids.len()
            ),
        ));
    }
    Ok(ids)
}
