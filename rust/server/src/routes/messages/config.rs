//! `thinking` and `output_config` of a Messages body → what they ask of the chat request:
//! chat template kwargs (`enable_thinking`, `reasoning_effort`) and `response_format`.
//! Mirrors the thinking and output_config part of `server/routes/messages/request.py`.

use serde_json::{Map, Value};

use super::json::{at_least, get, known_keys, need, object, one_of};
use crate::edge::error::ApiError;

/// The least `thinking.budget_tokens` Anthropic takes.
pub const MIN_THINKING_BUDGET: i64 = 1024;

/// `thinking.display` values (accepted and ignored, as vLLM: reasoning is always returned).
const THINKING_DISPLAYS: &[&str] = &["summarized", "omitted", "updates"];

/// `output_config.effort` values.
const EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max"];

/// `output_config`: its `format` as chat's `response_format`; its `effort`.
pub fn output_config<'a>(
    config: &'a Value,
    chat: &mut Map<String, Value>,
) -> Result<Option<&'a str>, ApiError> {
    let map = object(config, "output_config")?;
    known_keys(map, &["effort", "format"], "output_config")?;
    let effort = get(map, "effort")
        .map(|e| one_of(e, "output_config.effort", EFFORTS))
        .transpose()?;
    if let Some(format) = get(map, "format") {
        let at = "output_config.format";
        let fields = object(format, at)?;
        known_keys(fields, &["type", "schema"], at)?;
        if let Some(kind) = get(fields, "type") {
            one_of(kind, "output_config.format.type", &["json_schema"])?;
        }
        let schema = need(fields, "schema", at)?;
        object(schema, "output_config.format.schema")?;
        let mut spec = Map::new();
        spec.insert("name".into(), Value::String("json_schema".into()));
        spec.insert("schema".into(), schema.clone());
        let mut format = Map::new();
        format.insert("type".into(), Value::String("json_schema".into()));
        format.insert("json_schema".into(), Value::Object(spec));
        chat.insert("response_format".into(), Value::Object(format));
    }
    Ok(effort)
}

/// What `thinking` (`Some(enable_thinking)`, `None` adaptive) and `output_config.effort`
/// ask of the chat template: the effort as vLLM hands it over (`reasoning_effort`, with
/// `enable_thinking`), unless thinking is disabled.
pub fn template_kwargs(thinking: Option<bool>, effort: Option<&str>) -> Map<String, Value> {
    let mut kwargs = Map::new();
    if let Some(effort) = effort.filter(|_| thinking != Some(false)) {
        kwargs.insert("reasoning_effort".into(), Value::String(effort.to_owned()));
        kwargs.insert("enable_thinking".into(), Value::Bool(true));
    }
    if let Some(enabled) = thinking {
        kwargs.insert("enable_thinking".into(), Value::Bool(enabled));
    }
    kwargs
}

/// `thinking`: enabled (`Some(true)`; needs the server's reasoning parser; `budget_tokens`
/// ≥ 1024 and below `max_tokens`), disabled (`Some(false)`) or adaptive (`None`: the
/// template's default, as vLLM pins nothing); with the thinking budget (enabled:
/// `budget_tokens`, enforced by the engine as vLLM maps it).
pub fn thinking_enabled(
    thinking: &Value,
    max_tokens: Option<i64>,
    reasoning: bool,
) -> Result<(Option<bool>, Option<i64>), ApiError> {
    let map = object(thinking, "thinking")?;
    let kind = one_of(
        need(map, "type", "thinking")?,
        "thinking.type",
        &["enabled", "disabled", "adaptive"],
    )?;
    match kind {
        "disabled" => known_keys(map, &["type"], "thinking")?,
        "adaptive" => known_keys(map, &["type", "display"], "thinking")?,
        _ => known_keys(map, &["type", "budget_tokens", "display"], "thinking")?,
    }
    if kind == "disabled" {
        return Ok((Some(false), None));
    }
    if let Some(display) = get(map, "display") {
        one_of(display, "thinking.display", THINKING_DISPLAYS)?;
    }
    if kind == "adaptive" {
        return Ok((None, None));
    }
    let budget = at_least(
        need(map, "budget_tokens", "thinking")?,
        "thinking.budget_tokens",
        MIN_THINKING_BUDGET,
    )?;
    if let Some(max) = max_tokens.filter(|&max| budget >= max) {
        return Err(ApiError::bad(
            "thinking.budget_tokens",
            format!("budget_tokens ({budget}) must be less than max_tokens ({max})"),
        ));
    }
    if !reasoning {
        return Err(ApiError::bad(
            "thinking",
            "thinking needs a reasoning parser: start the server with --reasoning-parser",
        ));
    }
    Ok((Some(true), Some(budget)))
}
