//! vLLM's request extensions of chat and completions that shape the prompt and how the
//! answer is shown: `truncate_prompt_tokens` / `truncation_side`, chat's
//! `reasoning_effort`, `include_reasoning` and `separate_reasoning`, `return_token_ids`
//! and `return_tokens_as_token_ids` ([`ExtraFields`]). Checked after the sampling and
//! structured-output fields, before the model. Mirrors `server/validate/extras.py`.
//! Behaviour: docs/api.md, "vLLM's request extensions".

use serde_json::{Map, Value};

use crate::edge::error::ApiError;
use crate::openai::ExtraFields;

/// vLLM 0.33's `ReasoningEffort`.
pub const REASONING_EFFORTS: [&str; 7] =
    ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// A request's checked extensions (the default: none asked for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Extras {
    /// `return_token_ids`.
    pub token_ids: bool,
    /// `return_tokens_as_token_ids`: logprobs name each token `token_id:N`.
    pub ids_as_tokens: bool,
    /// Keep at most this many prompt tokens (`-1` resolved)...
    pub truncate: Option<usize>,
    /// ... the last ones (else the first).
    pub truncate_left: bool,
    pub reasoning_effort: Option<String>,
    pub include_reasoning: bool,
    pub separate_reasoning: bool,
}

impl Default for Extras {
    fn default() -> Self {
        Self {
            token_ids: false,
            ids_as_tokens: false,
            truncate: None,
            truncate_left: false,
            reasoning_effort: None,
            include_reasoning: true,
            separate_reasoning: true,
        }
    }
}

/// The extensions of a request checked; `left_by_default`: the tokenizer truncates on the
/// left (its `truncation_side`), where `truncation_side` is unset.
pub fn check(
    fields: ExtraFields,
    max_model_len: u64,
    left_by_default: bool,
) -> Result<Extras, ApiError> {
    let mut extras = Extras {
        token_ids: fields.return_token_ids.unwrap_or(false),
        ids_as_tokens: fields.return_tokens_as_token_ids.unwrap_or(false),
        include_reasoning: fields.include_reasoning != Some(false),
        separate_reasoning: fields.separate_reasoning != Some(false),
        ..Extras::default()
    };
    if let Some(truncate) = fields.truncate_prompt_tokens {
        const FIELD: &str = "truncate_prompt_tokens";
        if truncate < -1 {
            return Err(ApiError::bad(
                FIELD,
                format!(
                    "`truncate_prompt_tokens` must be -1 (the context length less one) or at \
                     least 0, got {truncate}"
                ),
            ));
        }
        let limit = i64::try_from(max_model_len).unwrap_or(i64::MAX);
        if truncate > limit {
            return Err(ApiError::bad(
                FIELD,
                format!(
                    "`truncate_prompt_tokens` {truncate} cannot be greater than max_model_len \
                     = {max_model_len}; request a smaller truncation size"
                ),
            ));
        }
        let keep = if truncate == -1 { limit - 1 } else { truncate };
        extras.truncate = Some(usize::try_from(keep).unwrap_or(0));
    }
    extras.truncate_left = match fields.truncation_side.as_deref() {
        None => left_by_default,
        Some("left") => true,
        Some("right") => false,
        Some(other) => {
            return Err(ApiError::bad(
                "truncation_side",
                format!("`truncation_side` must be `left` or `right`, got `{other}`"),
            ))
        }
    };
    if let Some(effort) = fields.reasoning_effort {
        if !REASONING_EFFORTS.contains(&effort.as_str()) {
            let listed = REASONING_EFFORTS.map(|e| format!("`{e}`")).join(", ");
            return Err(ApiError::bad(
                "reasoning_effort",
                format!("`reasoning_effort` must be one of {listed}, got `{effort}`"),
            ));
        }
        extras.reasoning_effort = Some(effort);
    }
    Ok(extras)
}

/// The chat template's kwargs: the request's `chat_template_kwargs` with vLLM's
/// `reasoning_effort` rule: the effort as `reasoning_effort` (over the kwargs' own), and
/// `enable_thinking` = effort is not `none` unless the kwargs name `enable_thinking`.
pub fn template_kwargs(mut kwargs: Map<String, Value>, effort: Option<&str>) -> Map<String, Value> {
    if let Some(effort) = effort {
        if !kwargs.contains_key("enable_thinking") {
            kwargs.insert("enable_thinking".into(), Value::Bool(effort != "none"));
        }
        kwargs.insert("reasoning_effort".into(), Value::String(effort.to_owned()));
    }
    kwargs
}

/// The prompt `ids` cut to `truncate_prompt_tokens`; `None` when nothing is cut.
pub fn truncated(ids: &[u32], extras: &Extras) -> Option<Vec<u32>> {
    let keep = extras.truncate?;
    if keep >= ids.len() {
        return None;
    }
    Some(if extras.truncate_left {
        ids[ids.len() - keep..].to_vec()
    } else {
        ids[..keep].to_vec()
    })
}

#[cfg(test)]
mod tests;
