//! The sampling fields beyond the plain numbers: `logit_bias`, `allowed_token_ids`,
//! `bad_words` (tokenized here), `prompt_logprobs`, and the logprobs / echo fields of each
//! endpoint, checked (every error names its field) and lowered for the engine. Mirrors
//! `server/validate/sampling.py`. Behaviour: docs/api.md, "Chat and completions request
//! fields".

use serde_json::Value;
use vrs_text::Tokenizer;

use crate::edge::error::{text_error, ApiError};
use crate::logprobs::MAX_LOGPROBS;
use crate::openai::{ChatFields, CompletionFields, SamplingFields};
use crate::validate::params::{check, Settings};

/// The largest `logit_bias` magnitude.
pub const MAX_BIAS: f64 = 100.0;

/// `fields` checked into `settings` (`vocab_size` bounds the token ids; `tokenizer`
/// tokenizes `bad_words`).
pub fn apply(
    fields: SamplingFields,
    settings: &mut Settings,
    tokenizer: &Tokenizer,
    vocab_size: u64,
) -> Result<(), ApiError> {
    if let Some(k) = fields.prompt_logprobs {
        check_k("prompt_logprobs", k)?;
        let k = u32::try_from(k).unwrap_or(0);
        settings.prompt_logprobs = Some(k);
        settings.sampling.prompt_logprobs = Some(k);
    }
    if let Some(bias) = fields.logit_bias.filter(|v| !v.is_null()) {
        settings.sampling.logit_bias = logit_bias(&bias, vocab_size)?;
    }
    if let Some(allowed) = fields.allowed_token_ids.filter(|v| !v.is_null()) {
        settings.sampling.allowed_token_ids = Some(allowed_token_ids(&allowed, vocab_size)?);
    }
    if let Some(words) = fields.bad_words.filter(|v| !v.is_null()) {
        settings.sampling.bad_words_token_ids = bad_words(&words, tokenizer)?;
    }
    Ok(())
}

fn check_k(field: &str, k: i64) -> Result<(), ApiError> {
    let rule = format!("must be in [0, {MAX_LOGPROBS}]");
    check(field, (0..=MAX_LOGPROBS).contains(&k), &rule, k)
}

/// `logit_bias` as (token id, bias) pairs sorted by id.
pub fn logit_bias(value: &Value, vocab_size: u64) -> Result<Vec<(u32, f64)>, ApiError> {
    let bad = |message: String| ApiError::bad("logit_bias", message);
    let Some(map) = value.as_object() else {
        return Err(bad(
            "`logit_bias` must be an object mapping token ids to biases".into(),
        ));
    };
    let mut pairs = Vec::with_capacity(map.len());
    for (key, bias) in map {
        let id = key
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|id| (0..i64::try_from(vocab_size).unwrap_or(i64::MAX)).contains(id))
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| {
                bad(format!(
                    "`logit_bias` key {key:?} is not a token id in [0, {vocab_size})"
                ))
            })?;
        let bias = bias
            .as_f64()
            .filter(|b| (-MAX_BIAS..=MAX_BIAS).contains(b))
            .ok_or_else(|| {
                bad(format!(
                    "`logit_bias` value {bias} for token {key:?} must be a number in \
                     [-{MAX_BIAS}, {MAX_BIAS}]"
                ))
            })?;
        pairs.push((id, bias));
    }
    pairs.sort_by_key(|(id, _)| *id);
    pairs.dedup_by_key(|(id, _)| *id);
    Ok(pairs)
}

/// `allowed_token_ids`: a non-empty list of ids in the vocabulary.
pub fn allowed_token_ids(value: &Value, vocab_size: u64) -> Result<Vec<u32>, ApiError> {
    let bad = |message: String| ApiError::bad("allowed_token_ids", message);
    let Some(list) = value.as_array() else {
        return Err(bad("`allowed_token_ids` must be a list of token ids".into()));
    };
    if list.is_empty() {
        return Err(bad("`allowed_token_ids` must not be empty".into()));
    }
    list.iter()
        .map(|item| {
            item.as_u64()
                .filter(|&id| id < vocab_size)
                .and_then(|id| u32::try_from(id).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "`allowed_token_ids` entry {item} is not a token id in [0, {vocab_size})"
                    ))
                })
        })
        .collect()
}

/// `bad_words` as token-id sequences.
pub fn bad_words(value: &Value, tokenizer: &Tokenizer) -> Result<Vec<Vec<u32>>, ApiError> {
    let bad = || ApiError::bad("bad_words", "`bad_words` must be a list of strings");
    let list = value.as_array().ok_or_else(bad)?;
    let mut out: Vec<Vec<u32>> = Vec::new();
    for word in list {
        let word = word.as_str().ok_or_else(bad)?.trim_start();
        for variant in [word.to_owned(), format!(" {word}")] {
            let ids = tokenizer.encode(&variant, false).map_err(text_error)?;
            if !ids.is_empty() && !out.contains(&ids) {
                out.push(ids);
            }
        }
    }
    Ok(out)
}

/// `logprobs` / `top_logprobs` of a chat request into `settings`.
pub fn chat_logprobs(chat: &ChatFields, settings: &mut Settings) -> Result<(), ApiError> {
    let logprobs = chat.logprobs.unwrap_or(false);
    if let Some(top) = chat.top_logprobs {
        check_k("top_logprobs", top)?;
        if top > 0 && !logprobs {
            return Err(ApiError::bad(
                "top_logprobs",
                "`top_logprobs` needs `logprobs` set to true",
            ));
        }
    }
    if logprobs {
        settings.sampling.logprobs =
            Some(u32::try_from(chat.top_logprobs.unwrap_or(0)).unwrap_or(0));
    }
    Ok(())
}

/// `logprobs` and `echo` of a completions request into `settings` (after [`apply`]):
/// with both, the engine computes the prompt's logprobs (at least the top `logprobs`);
/// `max_tokens` 0 with `echo` generates one token that is dropped.
pub fn completion_output(
    fields: &CompletionFields,
    settings: &mut Settings,
) -> Result<(), ApiError> {
    if let Some(k) = fields.logprobs {
        check_k("logprobs", k)?;
        settings.sampling.logprobs = Some(u32::try_from(k).unwrap_or(0));
    }
    settings.echo = fields.echo.unwrap_or(false);
    if let (true, Some(k)) = (settings.echo, settings.sampling.logprobs) {
        let wanted = settings.sampling.prompt_logprobs.unwrap_or(0).max(k);
        settings.sampling.prompt_logprobs = Some(wanted);
    }
    settings.echo_only = settings.echo && settings.max_tokens == Some(0);
    Ok(())
}

#[cfg(test)]
mod tests;
