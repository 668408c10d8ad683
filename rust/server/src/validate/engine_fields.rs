//! The request fields the engine acts on beyond sampling (vLLM's): `priority`,
//! `cache_salt`, `thinking_token_budget`, `vllm_xargs` and `kv_transfer_params`, checked
//! (a 400 naming the field) and lowered for the engine. Mirrors
//! `server/validate/engine_fields.py` rule for rule, message for message. Behaviour:
//! docs/api.md, "Chat and completions request fields".
//!
//! Check order, after the other value checks: `priority` (an integer; non-zero needs
//! `--scheduling-policy priority`), `cache_salt`, `kv_transfer_params`, `vllm_xargs`,
//! `thinking_token_budget` (needs a reasoning parser, and no structured-output
//! constraint).

use serde_json::{Map, Value};
use vrs_engine_client::launcher::json_to_msgpack;
use vrs_text::Tokenizer;
use vrs_wire::ThinkingBudget;

use crate::edge::error::{text_error, ApiError};
use crate::parsers::reasoning::markers_of;
use crate::parsers::tools::{choice_text, ToolMode, ToolSettings};
use crate::validate::params::Settings;

/// The most characters a `cache_salt` may have (vLLM's `_MAX_CACHE_SALT_LENGTH`).
pub const MAX_CACHE_SALT: usize = 128;
const SALT_FORBIDDEN: [char; 4] = ['@', '/', '\\', '\0'];
const XARGS_SHAPE: &str = "`vllm_xargs` must be an object whose values are strings, numbers, \
     or lists of strings and numbers";

/// What these checks need from the server.
pub struct Server<'a> {
    /// `--scheduling-policy` (`None`: no engine to schedule, as in the render service:
    /// any priority is taken).
    pub scheduling_policy: Option<&'a str>,
    /// The reasoning parser's name (`None`: none, so no thinking budget).
    pub reasoning_parser: Option<&'static str>,
    pub tokenizer: &'a Tokenizer,
}

/// The fields of the body `body` checked into `settings`.
pub fn apply(body: &Value, settings: &mut Settings, server: &Server<'_>) -> Result<(), ApiError> {
    let field = |name: &str| body.get(name).filter(|v| !v.is_null());
    settings.priority = priority(field("priority"), server.scheduling_policy)?;
    settings.cache_salt = field("cache_salt").map(cache_salt).transpose()?;
    let kv = field("kv_transfer_params")
        .map(kv_transfer_params)
        .transpose()?;
    let xargs = field("vllm_xargs").map(vllm_xargs).transpose()?;
    settings.sampling.extra_args = extra_args(xargs, kv);
    if let Some(budget) = field("thinking_token_budget")
        .map(thinking_token_budget)
        .transpose()?
        .flatten()
    {
        settings.sampling.thinking_budget = Some(thinking_budget(budget, settings, server)?);
    }
    Ok(())
}

/// A forcing `tool_choice` (required / named) with a thinking budget is a 400, as with a
/// structured-output constraint (the forced call is a grammar from the first token).
pub fn with_tools(tools: &ToolSettings, settings: &Settings) -> Result<(), ApiError> {
    if matches!(tools.mode, ToolMode::Required | ToolMode::Named)
        && settings.sampling.thinking_budget.is_some()
    {
        return Err(ApiError::bad(
            "tool_choice",
            format!(
                "`tool_choice` {} cannot be combined with `thinking_token_budget`",
                choice_text(tools.mode, tools.name.as_deref())
            ),
        ));
    }
    Ok(())
}

pub fn priority(value: Option<&Value>, policy: Option<&str>) -> Result<i64, ApiError> {
    let Some(value) = value else { return Ok(0) };
    let level = value.as_i64().ok_or_else(|| {
        ApiError::bad(
            "priority",
            format!(
                "`priority` must be an integer in [{}, {}]",
                i64::MIN,
                i64::MAX
            ),
        )
    })?;
    if level != 0 && policy == Some("fcfs") {
        // vLLM's words (its engine's check): the server schedules first come, first served.
        return Err(ApiError::bad(
            "priority",
            format!(
                "Got priority {level} but Priority scheduling is not enabled. Start the \
                 server with --scheduling-policy priority"
            ),
        ));
    }
    Ok(level)
}

pub fn cache_salt(value: &Value) -> Result<String, ApiError> {
    let salt = value.as_str().filter(|s| !s.is_empty()).ok_or_else(|| {
        ApiError::bad(
            "cache_salt",
            "Parameter 'cache_salt' must be a non-empty string if provided.",
        )
    })?;
    if salt.chars().count() > MAX_CACHE_SALT || salt.contains(SALT_FORBIDDEN) {
        return Err(ApiError::bad(
            "cache_salt",
            format!(
                "Parameter 'cache_salt' must be at most {MAX_CACHE_SALT} characters and must \
                 not contain '@', '/', '\\\\', or NUL."
            ),
        ));
    }
    Ok(salt.to_owned())
}

fn kv_transfer_params(value: &Value) -> Result<Map<String, Value>, ApiError> {
    value.as_object().cloned().ok_or_else(|| {
        ApiError::bad(
            "kv_transfer_params",
            "`kv_transfer_params` must be an object",
        )
    })
}

/// A `vllm_xargs` scalar (vLLM's `str | int | float`; a boolean is an integer to its
/// validation), or `None` when `value` is not one.
fn scalar(value: &Value) -> Option<Value> {
    match value {
        Value::String(_) | Value::Number(_) => Some(value.clone()),
        Value::Bool(b) => Some(Value::from(i64::from(*b))),
        _ => None,
    }
}

fn vllm_xargs(value: &Value) -> Result<Map<String, Value>, ApiError> {
    let bad = |message: String| ApiError::bad("vllm_xargs", message);
    let map = value.as_object().ok_or_else(|| bad(XARGS_SHAPE.into()))?;
    let mut out = Map::new();
    for (key, item) in map {
        let checked = match item {
            Value::Array(items) => items
                .iter()
                .map(scalar)
                .collect::<Option<Vec<_>>>()
                .map(Value::Array)
                .ok_or_else(|| bad(format!("{XARGS_SHAPE}; `{key}` holds another value")))?,
            other => scalar(other)
                .ok_or_else(|| bad(format!("{XARGS_SHAPE}; `{key}` is another value")))?,
        };
        out.insert(key.clone(), checked);
    }
    Ok(out)
}

/// vLLM's `SamplingParams.extra_args`: `vllm_xargs`, then a non-empty
/// `kv_transfer_params` under that key (replacing an xargs entry of the name in its
/// place); `None` when empty.
fn extra_args(
    xargs: Option<Map<String, Value>>,
    kv: Option<Map<String, Value>>,
) -> Option<rmpv::Value> {
    let mut out = xargs.unwrap_or_default();
    if let Some(kv) = kv.filter(|kv| !kv.is_empty()) {
        out.insert("kv_transfer_params".into(), Value::Object(kv));
    }
    (!out.is_empty()).then(|| json_to_msgpack(&Value::Object(out)))
}

/// The checked `thinking_token_budget` (vLLM's rule: -1 means no budget).
fn thinking_token_budget(value: &Value) -> Result<Option<u32>, ApiError> {
    match value.as_i64() {
        Some(-1) => Ok(None),
        Some(budget) if budget >= 0 => Ok(Some(u32::try_from(budget).unwrap_or(u32::MAX))),
        _ => Err(ApiError::bad(
            "thinking_token_budget",
            "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.",
        )),
    }
}

/// The engine's budget spec: `budget` with the reasoning parser's markers tokenized.
fn thinking_budget(
    budget: u32,
    settings: &Settings,
    server: &Server<'_>,
) -> Result<ThinkingBudget, ApiError> {
    let bad = |message: String| ApiError::bad("thinking_token_budget", message);
    let Some(markers) = server.reasoning_parser.and_then(markers_of) else {
        return Err(bad(
            "`thinking_token_budget` needs a reasoning parser: start the server with \
             --reasoning-parser"
                .into(),
        ));
    };
    if let Some(name) = settings.constraint {
        return Err(bad(format!(
            "`thinking_token_budget` cannot be combined with `{name}`: the grammar applies \
             from the first generated token"
        )));
    }
    let encode = |texts: &[&str]| -> Result<Vec<Vec<u32>>, ApiError> {
        texts
            .iter()
            .map(|text| server.tokenizer.encode(text, false).map_err(text_error))
            .collect()
    };
    Ok(ThinkingBudget {
        budget,
        start_token_ids: encode(markers.start)?,
        end_token_ids: encode(markers.end)?,
    })
}

#[cfg(test)]
mod tests;
