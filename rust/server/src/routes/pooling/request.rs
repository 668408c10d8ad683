//! A pooling request's body (vLLM 0.33's pooling request shapes) and prompts: the fields
//! each route takes (an unknown one is a 400), their shared checks, and the prompts,
//! tokenized on the blocking pool: `input` as a string, a list of strings, token ids, a
//! list of token-id lists, or chat messages (one conversation, or a list of them; also in
//! `messages`) rendered with the chat template; then `truncate_prompt_tokens` and the
//! context length. Mirrors `server/routes/pooling/request.py`.

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

use super::dispatch::Scheduling;

/// The fields of every pooling route (vLLM's `PoolingBasicRequestMixin`,
/// `ClassifyRequestMixin`).
pub const COMMON: &[&str] = &[
    "model",
    "user",
    "truncate_prompt_tokens",
    "truncation_side",
    "priority",
    "cache_salt",
    "use_activation",
];
/// The prompt fields of /v1/embeddings, /pooling and /classify.
pub const INPUT: &[&str] = &[
    "input",
    "messages",
    "add_special_tokens",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template_kwargs",
];
/// The output fields of /v1/embeddings and /pooling.
pub const ENCODING: &[&str] = &["encoding_format", "embed_dtype", "endianness", "dimensions"];
/// The fields of /score and /rerank besides their texts.
pub const SCORING: &[&str] = &[
    "max_tokens_per_query",
    "max_tokens_per_doc",
    "instruction",
    "chat_template_kwargs",
];

/// The typed fields every route shares.
#[derive(Debug, Default, Deserialize)]
pub struct Basic {
    pub model: Option<String>,
    pub user: Option<String>,
    #[serde(default, deserialize_with = "crate::openai::ints::opt_i64")]
    pub truncate_prompt_tokens: Option<i64>,
    pub truncation_side: Option<String>,
    pub use_activation: Option<bool>,
    pub add_special_tokens: Option<bool>,
    pub add_generation_prompt: Option<bool>,
    pub continue_final_message: Option<bool>,
    pub chat_template_kwargs: Option<Map<String, Value>>,
}

/// A pooling body past the shared checks.
pub struct Parsed {
    pub value: Value,
    pub basic: Basic,
    pub cut: Truncation,
    pub scheduling: Scheduling,
}

/// The body of a route that takes `keys` (with [`COMMON`]): JSON object, known fields,
/// their types, then `truncate_prompt_tokens`, `truncation_side`, `priority`,
/// `cache_salt`, the generation-prompt flags, and the model's name (404).
pub fn parse(state: &AppState, body: &[u8], keys: &[&[&str]]) -> Result<Parsed, ApiError> {
    let map = params::parse_object(body)?;
    if map.contains_key("normalize") {
        // vLLM 0.33's refusal: `use_activation` replaced it.
        return Err(ApiError::bad(
            "normalize",
            "Parameter `normalize` was removed; use `use_activation` instead.",
        ));
    }
    let known = |k: &str| COMMON.contains(&k) || keys.iter().any(|set| set.contains(&k));
    let unknown = map
        .keys()
        .map(String::as_str)
        .filter(|k| !known(k))
        .collect();
    params::refuse_unknown(unknown)?;
    let value = Value::Object(map);
    let basic: Basic = params::fields(&value)?;
    let cut = Truncation::of(state, &basic)?;
    let scheduling = Scheduling::of(state, &value)?;
    if basic.continue_final_message == Some(true) && basic.add_generation_prompt == Some(true) {
        return Err(ApiError::bad(
            "continue_final_message",
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        ));
    }
    state.check_model(basic.model.as_deref())?;
    Ok(Parsed {
        value,
        basic,
        cut,
        scheduling,
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
    /// the tokenizer's, as vLLM), checked in that order.
    fn of(state: &AppState, basic: &Basic) -> Result<Self, ApiError> {
        const FIELD: &str = "truncate_prompt_tokens";
        let max = state.max_model_len;
        let truncate = basic.truncate_prompt_tokens;
        if let Some(k) = truncate.filter(|&k| k < -1) {
            return Err(ApiError::bad(
                FIELD,
                format!("`truncate_prompt_tokens` must be -1 (the context length) or at least 0, got {k}"),
            ));
        }
        let left = match basic.truncation_side.as_deref() {
            None => state.tokenizer.config().truncation_side.as_deref() == Some("left"),
            Some("left") => true,
            Some("right") => false,
            Some(side) => {
                return Err(ApiError::bad(
                    "truncation_side",
                    format!("`truncation_side` must be `left` or `right`, got `{side}`"),
                ))
            }
        };
        if let Some(k) = truncate.filter(|&k| u64::try_from(k).is_ok_and(|k| k > max)) {
            return Err(ApiError::bad(
                FIELD,
                format!(
                    "truncate_prompt_tokens={k} cannot be greater than max_model_len = \
                     {max}. Please request a smaller truncation size."
                ),
            ));
        }
        let keep = match truncate {
            None => None,
            Some(-1) => Some(usize::try_from(max).unwrap_or(usize::MAX)),
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

/// One prompt before tokenizing.
#[derive(Debug, Clone)]
enum Item {
    Text(String),
    Ids(Vec<u32>),
    Chat(Vec<Value>),
}

/// One prompt checked, ready for the blocking pool.
enum Work {
    Text(String),
    Ids(Vec<u32>),
    Chat(ChatTemplateInput),
}

const SHAPES: &str = "`input` must be a string, a list of strings, a list of token ids, a \
                      list of lists of token ids, or chat messages";

fn is_conversation(value: &Value) -> bool {
    matches!(value, Value::Array(items) if !items.is_empty()
        && items.iter().all(|m| m.get("role").is_some_and(Value::is_string)))
}

fn token_list(value: &Value) -> Option<Vec<u32>> {
    value
        .as_array()?
        .iter()
        .map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
        .collect()
}

/// The request's prompts before tokenizing, and the field that holds them.
fn items(value: &Value) -> Result<(Vec<Item>, &'static str), ApiError> {
    let given = |k: &str| value.get(k).filter(|v| !v.is_null());
    let conversations = |v: &Value| -> Option<Vec<Item>> {
        let list = v.as_array().filter(|l| !l.is_empty())?;
        list.iter()
            .map(|c| {
                is_conversation(c).then(|| Item::Chat(c.as_array().cloned().unwrap_or_default()))
            })
            .collect()
    };
    if let Some(messages) = given("messages") {
        if given("input").is_some() {
            return Err(ApiError::bad(
                "messages",
                "send `input` or `messages`, not both",
            ));
        }
        if let Some(batch) = conversations(messages) {
            return Ok((batch, "messages"));
        }
        if !is_conversation(messages) {
            return Err(ApiError::bad(
                "messages",
                "`messages` must be a non-empty list of chat messages, or a list of such lists",
            ));
        }
        return Ok((
            vec![Item::Chat(messages.as_array().cloned().unwrap_or_default())],
            "messages",
        ));
    }
    let input = given("input").ok_or_else(|| ApiError::bad("input", "`input` is required"))?;
    let list = match input {
        Value::String(s) => return Ok((vec![Item::Text(s.clone())], "input")),
        Value::Array(list) if list.is_empty() => {
            return Err(ApiError::bad("input", "`input` must not be empty"))
        }
        Value::Array(list) => list,
        _ => return Err(ApiError::bad("input", SHAPES)),
    };
    if is_conversation(input) {
        return Ok((vec![Item::Chat(list.clone())], "input"));
    }
    if let Some(batch) = conversations(input) {
        return Ok((batch, "input"));
    }
    if list.iter().all(Value::is_number) {
        let ids = token_list(input).ok_or_else(|| ApiError::bad("input", SHAPES))?;
        return Ok((vec![Item::Ids(ids)], "input"));
    }
    if list.iter().all(Value::is_string) {
        let texts = list.iter().filter_map(Value::as_str);
        return Ok((texts.map(|t| Item::Text(t.to_owned())).collect(), "input"));
    }
    let ids: Option<Vec<Item>> = list.iter().map(|t| token_list(t).map(Item::Ids)).collect();
    Ok((ids.ok_or_else(|| ApiError::bad("input", SHAPES))?, "input"))
}

/// The template input of one conversation (the chat route's checks on its messages).
fn conversation(
    state: &AppState,
    messages: Vec<Value>,
    basic: &Basic,
) -> Result<ChatTemplateInput, ApiError> {
    let messages: Vec<ChatMessage> = params::fields(&Value::Array(messages))
        .map_err(|e| e.rename_param(|p| format!("messages{}", p.trim_start_matches('.'))))?;
    if state.template.is_none() {
        return Err(ApiError::bad_request(NO_CHAT_TEMPLATE));
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
        add_generation_prompt: basic.add_generation_prompt.unwrap_or(false),
        continue_final_message: basic.continue_final_message.unwrap_or(false),
        kwargs: basic.chat_template_kwargs.clone().unwrap_or_default(),
    })
}

/// The request's prompts as token ids: rendered and tokenized on the blocking pool,
/// truncated, and checked (ids in the vocabulary, no empty prompt, none longer than the
/// context length).
pub async fn prompts(state: &SharedState, parsed: &Parsed) -> Result<Vec<Vec<u32>>, ApiError> {
    let (items, field) = items(&parsed.value)?;
    let limit = state.options.max_batch_prompts;
    if items.len() > limit {
        return Err(ApiError::bad(
            "input",
            format!(
                "this request has {} inputs; this server takes at most {limit} in one request \
                 (--max-batch-prompts)",
                items.len()
            ),
        ));
    }
    let vocab = state.vocab_size;
    let mut work = Vec::with_capacity(items.len());
    for item in items {
        work.push(match item {
            Item::Chat(messages) => Work::Chat(conversation(state, messages, &parsed.basic)?),
            Item::Ids(ids) => {
                if let Some(bad) = ids.iter().find(|&&id| u64::from(id) >= vocab) {
                    return Err(ApiError::bad(
                        "input",
                        format!(
                            "token id {bad} in `input` is out of the vocabulary (size {vocab})"
                        ),
                    ));
                }
                Work::Ids(ids)
            }
            Item::Text(text) => Work::Text(text),
        });
    }
    let special = parsed.basic.add_special_tokens;
    let st = Arc::clone(state);
    let encoded: Vec<Vec<u32>> = offload(usize::MAX, move || {
        work.into_iter()
            .map(|w| match w {
                Work::Chat(chat) => {
                    let template = st
                        .template()
                        .ok_or_else(|| ApiError::bad_request(NO_CHAT_TEMPLATE))?;
                    let text = template.render(&chat).map_err(text_error)?;
                    // A conversation: special tokens only when asked (the template adds them).
                    st.tokenizer
                        .encode(&text, special == Some(true))
                        .map_err(text_error)
                }
                Work::Text(text) => st
                    .tokenizer
                    .encode(&text, special != Some(false))
                    .map_err(text_error),
                Work::Ids(ids) => Ok(ids),
            })
            .collect()
    })
    .await?;
    encoded
        .into_iter()
        .enumerate()
        .map(|(index, ids)| check_length(state, parsed.cut.apply(ids), index, field))
        .collect()
}

/// `ids` unless empty or longer than the context length (400s naming `field`).
pub fn check_length(
    state: &AppState,
    ids: Vec<u32>,
    index: usize,
    field: &str,
) -> Result<Vec<u32>, ApiError> {
    if ids.is_empty() {
        return Err(ApiError::bad(
            field,
            format!("`{field}` must not contain an empty prompt (prompt {index} is empty)"),
        ));
    }
    let max = state.max_model_len;
    if ids.len() as u64 > max {
        return Err(ApiError::bad(
            field,
            format!(
                "This model's maximum context length is {max} tokens. However, prompt {index} \
                 of `{field}` has {} tokens. Please reduce the length of the input.",
                ids.len()
            ),
        ));
    }
    Ok(ids)
}
