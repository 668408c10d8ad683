//! Request bodies to validated generation settings: JSON parsing, the field policy
//! (known, refused, unknown) and value checks. Every error names its field.

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use vrs_wire::SamplingParams;

use crate::edge::error::ApiError;
use crate::openai::{CommonFields, Stop, COMMON_KEYS};
use crate::validate::extras::Extras;

/// Which request kind a body is for; decides the accepted keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completions,
}

/// Generation settings checked and ready for the engine (except `max_tokens`, which
/// needs the prompt length: see [`resolve_max_tokens`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub sampling: SamplingParams,
    pub max_tokens: Option<u32>,
    /// The field `max_tokens` came from (`max_tokens`, or chat's `max_completion_tokens`),
    /// named by its errors.
    pub max_tokens_field: &'static str,
    pub stop: Vec<String>,
    pub skip_special_tokens: bool,
    pub stream: bool,
    pub include_usage: bool,
    /// `stream_options.continuous_usage_stats` (with `include_usage`): usage on every
    /// chunk.
    pub continuous_usage: bool,
    pub user: Option<String>,
    pub model: Option<String>,
    /// Choices (engine requests) per request.
    pub n: u32,
    /// Completions: the prompt goes before the text.
    pub echo: bool,
    /// Completions: `max_tokens` 0 with `echo`: the one token generated is dropped.
    pub echo_only: bool,
    /// `prompt_logprobs`: the top k shown per prompt token.
    pub prompt_logprobs: Option<u32>,
    /// The field that set `sampling.structured_outputs` (the `param` of its engine
    /// errors): `response_format`, `structured_outputs.<kind>`, a `guided_*` field, or
    /// `tools`.
    pub constraint: Option<&'static str>,
    /// The engine request's own fields (`validate::engine_fields`): vLLM's `priority`
    /// and `cache_salt`.
    pub priority: i64,
    pub cache_salt: Option<String>,
    /// `use_beam_search` (`None`: sampling); `validate::beam_search` checks the rest.
    pub beam_search: Option<BeamSearch>,
    /// vLLM's extensions: truncation, reasoning effort and display, token ids.
    pub extras: Extras,
}

/// `use_beam_search`: `width` (the request's `n`) beams ranked by their cumulative logprob
/// over their length to the power `length_penalty`. What may go with it:
/// `validate::beam_search`; the search: `output::beam_search`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BeamSearch {
    pub width: u32,
    pub length_penalty: f64,
}

/// Most choices one request may ask for.
pub const MAX_N: i64 = 128;

/// The body as a JSON object.
pub fn parse_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request(
            "the request body is empty; expected a JSON object",
        ));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "invalid JSON in the request body: {e}"
        ))),
    }
}

/// Refuses keys whose feature is not implemented (unless they hold a value that asks for
/// nothing, like `"n": 1` or `"tools": []`), the first in sorted order, then unknown keys.
pub fn check_keys(map: &Map<String, Value>, endpoint: Endpoint) -> Result<(), ApiError> {
    let own: &[&str] = match endpoint {
        Endpoint::Chat => crate::openai::CHAT_KEYS,
        Endpoint::Completions => crate::openai::COMPLETION_KEYS,
    };
    let mut unknown = Vec::new();
    let mut keys: Vec<_> = map.iter().collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
    for (key, value) in keys {
        if COMMON_KEYS.contains(&key.as_str()) || own.contains(&key.as_str()) {
            continue;
        }
        match refusal(endpoint, key, value) {
            Some(Refusal::Accepted) => {}
            Some(Refusal::Refused(message)) => return Err(ApiError::bad(key.clone(), message)),
            None => unknown.push(key.as_str()),
        }
    }
    refuse_unknown(unknown)
}

/// A 400 naming the `unknown` body keys (sorted; the first is the error's `param`), or
/// `Ok` when there are none.
pub fn refuse_unknown(mut unknown: Vec<&str>) -> Result<(), ApiError> {
    unknown.sort_unstable();
    match unknown.as_slice() {
        [] => Ok(()),
        [one] => Err(ApiError::bad(*one, format!("unknown field `{one}`"))),
        many => Err(ApiError::bad(
            many[0],
            format!(
                "unknown fields: {}",
                many.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

enum Refusal {
    Accepted,
    Refused(String),
}

/// The policy for OpenAI fields this server knows but does not implement.
fn refusal(endpoint: Endpoint, key: &str, value: &Value) -> Option<Refusal> {
    let chat = endpoint == Endpoint::Chat;
    let neutral = match key {
        "best_of" => {
            let ok = value.is_null() || value.as_u64() == Some(1);
            return Some(if ok {
                Refusal::Accepted
            } else {
                Refusal::Refused("`best_of` > 1 is not supported".into())
            });
        }
        "suffix" if !chat => value.is_null() || value.as_str() == Some(""),
        "functions" if chat => value.is_null() || value.as_array().is_some_and(Vec::is_empty),
        "function_call" if chat => value.is_null() || value.as_str() == Some("none"),
        "modalities" | "audio" | "prediction" | "web_search_options" | "documents" if chat => {
            value.is_null()
        }
        "service_tier" | "store" | "metadata" | "mm_processor_kwargs" => value.is_null(),
        _ => return None,
    };
    Some(if neutral {
        Refusal::Accepted
    } else {
        Refusal::Refused(format!("`{key}` is not supported"))
    })
}

/// Deserializes `T` from the body's object, naming the field of any type error.
pub fn fields<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        if path == "." {
            ApiError::bad_request(inner.to_string())
        } else {
            ApiError::bad(path.clone(), format!("invalid value for `{path}`: {inner}"))
        }
    })
}

/// Deserializes a body's four field groups ([`CommonFields`], the endpoint's own, the
/// sampling fields, vLLM's extensions); of their type errors, the one at the key the body
/// gives first, so that types are checked in body order whatever group a field is in.
pub fn field_groups<A, B, C, D>(value: &Value) -> Result<(A, B, C, D), ApiError>
where
    A: DeserializeOwned,
    B: DeserializeOwned,
    C: DeserializeOwned,
    D: DeserializeOwned,
{
    match (
        fields::<A>(value),
        fields::<B>(value),
        fields::<C>(value),
        fields::<D>(value),
    ) {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => Ok((a, b, c, d)),
        (a, b, c, d) => {
            let position = |err: &ApiError| {
                let ApiError::BadRequest {
                    param: Some(param), ..
                } = err
                else {
                    return 0;
                };
                let key = param.split(['.', '[']).next().unwrap_or(param);
                value
                    .as_object()
                    .and_then(|map| map.keys().position(|k| k == key))
                    .unwrap_or(0)
            };
            let errors = [a.err(), b.err(), c.err(), d.err()];
            let first = errors.into_iter().flatten().min_by_key(position);
            Err(first.unwrap_or_else(|| ApiError::Internal("no field error".into())))
        }
    }
}

/// Checks the shared fields. `max_tokens_override` is chat's `max_completion_tokens`;
/// `zero_ok`: `max_tokens` may be 0 (completions with `echo`).
pub fn validate(
    common: CommonFields,
    max_tokens_override: Option<(&'static str, i64)>,
    zero_ok: bool,
    vocab_size: u64,
) -> Result<Settings, ApiError> {
    let (max_field, max_value) = match max_tokens_override {
        Some((field, value)) => (field, Some(value)),
        None => ("max_tokens", common.max_tokens),
    };
    let max_tokens = match max_value {
        None => None,
        Some(0) if zero_ok => Some(0),
        Some(v) if v < 1 => {
            return Err(ApiError::bad(
                max_field,
                format!("`{max_field}` must be at least 1, got {v}"),
            ))
        }
        Some(v) => Some(u32::try_from(v).unwrap_or(u32::MAX)),
    };
    let mut sampling = SamplingParams::new(max_tokens.unwrap_or(0));
    if let Some(t) = common.temperature {
        check("temperature", t >= 0.0, "must be >= 0", t)?;
        sampling.temperature = t;
    }
    if let Some(p) = common.top_p {
        check("top_p", p > 0.0 && p <= 1.0, "must be in (0, 1]", p)?;
        sampling.top_p = p;
    }
    if let Some(k) = common.top_k {
        check(
            "top_k",
            k >= -1,
            "must be -1 (disabled), 0 (disabled) or positive",
            k,
        )?;
        sampling.top_k = k.max(0);
    }
    if let Some(p) = common.min_p {
        check("min_p", (0.0..=1.0).contains(&p), "must be in [0, 1]", p)?;
        sampling.min_p = p;
    }
    for (field, value, slot) in [
        (
            "presence_penalty",
            common.presence_penalty,
            &mut sampling.presence_penalty,
        ),
        (
            "frequency_penalty",
            common.frequency_penalty,
            &mut sampling.frequency_penalty,
        ),
    ] {
        if let Some(v) = value {
            check(field, (-2.0..=2.0).contains(&v), "must be in [-2, 2]", v)?;
            *slot = v;
        }
    }
    if let Some(r) = common.repetition_penalty {
        check(
            "repetition_penalty",
            r > 0.0 && r <= 2.0,
            "must be in (0, 2]",
            r,
        )?;
        sampling.repetition_penalty = r;
    }
    if let Some(m) = common.min_tokens {
        check("min_tokens", m >= 0, "must be >= 0", m)?;
        if let Some(max) = max_tokens {
            check(
                "min_tokens",
                m <= i64::from(max),
                "must not exceed max_tokens",
                m,
            )?;
        }
        sampling.min_tokens = u32::try_from(m).unwrap_or(u32::MAX);
    }
    sampling.seed = common.seed;
    sampling.ignore_eos = common.ignore_eos.unwrap_or(false);
    if let Some(ids) = common.stop_token_ids {
        if let Some(bad) = ids.iter().find(|&&id| u64::from(id) >= vocab_size) {
            return Err(ApiError::bad(
                "stop_token_ids",
                format!("token id {bad} in `stop_token_ids` is out of the vocabulary (size {vocab_size})"),
            ));
        }
        sampling.stop_token_ids = ids;
    }
    let stop = match common.stop {
        None => Vec::new(),
        Some(Stop::One(s)) => vec![s],
        Some(Stop::Many(list)) => list,
    };
    if stop.iter().any(String::is_empty) {
        return Err(ApiError::bad("stop", "stop strings must not be empty"));
    }
    let stream = common.stream.unwrap_or(false);
    let (mut include_usage, mut continuous_usage) = (false, false);
    if let Some(options) = common.stream_options {
        if !stream {
            return Err(ApiError::bad(
                "stream_options",
                "`stream_options` can only be set when `stream` is true",
            ));
        }
        include_usage = options.include_usage.unwrap_or(false);
        continuous_usage = include_usage && options.continuous_usage_stats.unwrap_or(false);
    }
    let n = common.n.unwrap_or(1);
    check(
        "n",
        (1..=MAX_N).contains(&n),
        &format!("must be in [1, {MAX_N}]"),
        n,
    )?;
    let beam_search = common.use_beam_search.unwrap_or(false).then(|| BeamSearch {
        width: u32::try_from(n).unwrap_or(1),
        length_penalty: common.length_penalty.unwrap_or(1.0),
    });
    Ok(Settings {
        sampling,
        max_tokens,
        max_tokens_field: max_field,
        stop,
        skip_special_tokens: common.skip_special_tokens.unwrap_or(true),
        stream,
        include_usage,
        continuous_usage,
        user: common.user,
        model: common.model,
        n: u32::try_from(n).unwrap_or(1),
        echo: false,
        echo_only: false,
        prompt_logprobs: None,
        constraint: None,
        beam_search,
        priority: 0,
        cache_salt: None,
        extras: Extras::default(),
    })
}

pub fn check<T: std::fmt::Display>(
    field: &str,
    ok: bool,
    rule: &str,
    value: T,
) -> Result<(), ApiError> {
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad(
            field,
            format!("`{field}` {rule}, got {value}"),
        ))
    }
}

/// The request's output budget: `max_tokens` checked against the context length, or by
/// default what is left of it. `field` names where the request set it (`max_tokens` or
/// `max_completion_tokens`), `what` the prompt ("messages" or "prompt").
pub fn resolve_max_tokens(
    requested: Option<u32>,
    field: &str,
    prompt_len: usize,
    max_model_len: u64,
    what: &str,
) -> Result<u32, ApiError> {
    let prompt = prompt_len as u64;
    if prompt_len == 0 {
        return Err(ApiError::bad(
            what,
            format!("the {what} produced no tokens; the prompt must not be empty"),
        ));
    }
    if prompt >= max_model_len {
        return Err(ApiError::bad(
            what,
            format!(
                "This model's maximum context length is {max_model_len} tokens. However, your \
                 request has {prompt} input tokens. Please reduce the length of the {what}."
            ),
        ));
    }
    match requested {
        Some(m) if prompt + u64::from(m) > max_model_len => Err(ApiError::bad(
            field,
            format!(
                "This model's maximum context length is {max_model_len} tokens. However, you \
                 requested {} tokens ({prompt} in the {what}, {m} in the completion). Please \
                 reduce the length of the {what} or completion.",
                prompt + u64::from(m)
            ),
        )),
        Some(m) => Ok(m),
        None => Ok(u32::try_from(max_model_len - prompt).unwrap_or(u32::MAX)),
    }
}

#[cfg(test)]
mod tests;
