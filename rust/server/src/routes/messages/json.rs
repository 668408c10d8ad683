//! Typed reads of a raw Messages body: each 400 has the field path as its `param` (the
//! Anthropic error body says `param: message`) and the same text as the Python frontend.

use serde_json::{Map, Value};

use crate::edge::error::ApiError;
use crate::openai::ints::{self, I64_RANGE};

/// `base.key` (or `key` at the top level).
pub fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_owned()
    } else {
        format!("{base}.{key}")
    }
}

/// `base[index]`.
pub fn at(base: &str, index: usize) -> String {
    format!("{base}[{index}]")
}

/// The 400 of a required field that is absent (or null).
pub fn required(path: &str) -> ApiError {
    ApiError::bad(path, "Field required")
}

/// `invalid value: expected <what>`.
pub fn invalid(path: &str, what: &str) -> ApiError {
    ApiError::bad(path, format!("invalid value: expected {what}"))
}

/// The value of `key`, unless absent or null.
pub fn get<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|v| !v.is_null())
}

/// The value of `key`, required.
pub fn need<'a>(map: &'a Map<String, Value>, key: &str, base: &str) -> Result<&'a Value, ApiError> {
    get(map, key).ok_or_else(|| required(&join(base, key)))
}

pub fn object<'a>(value: &'a Value, path: &str) -> Result<&'a Map<String, Value>, ApiError> {
    value.as_object().ok_or_else(|| invalid(path, "an object"))
}

pub fn array<'a>(value: &'a Value, path: &str) -> Result<&'a Vec<Value>, ApiError> {
    value.as_array().ok_or_else(|| invalid(path, "a list"))
}

pub fn string<'a>(value: &'a Value, path: &str) -> Result<&'a str, ApiError> {
    value.as_str().ok_or_else(|| invalid(path, "a string"))
}

pub fn boolean(value: &Value, path: &str) -> Result<bool, ApiError> {
    value.as_bool().ok_or_else(|| invalid(path, "a boolean"))
}

/// An integer (a JSON number without a fraction); one outside the i64 range is refused
/// as out of range.
pub fn integer(value: &Value, path: &str) -> Result<i64, ApiError> {
    if ints::beyond_i64(value) {
        return Err(ApiError::bad(path, format!("invalid value: {I64_RANGE}")));
    }
    value
        .as_i64()
        .or_else(|| {
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                .map(|f| f as i64)
        })
        .ok_or_else(|| invalid(path, "an integer"))
}

/// An integer of at least `min`.
pub fn at_least(value: &Value, path: &str, min: i64) -> Result<i64, ApiError> {
    let what = format!("an integer >= {min}");
    match integer(value, path) {
        Ok(n) if n >= min => Ok(n),
        Err(err) if ints::beyond_i64(value) => Err(err),
        _ => Err(invalid(path, &what)),
    }
}

/// One of `allowed` (a string).
pub fn one_of<'a>(value: &'a Value, path: &str, allowed: &[&str]) -> Result<&'a str, ApiError> {
    let quoted: Vec<String> = allowed.iter().map(|a| format!("'{a}'")).collect();
    let what = match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    };
    match value.as_str() {
        Some(s) if allowed.contains(&s) => Ok(s),
        Some(s) => Err(invalid(path, &format!("{what}, got '{s}'"))),
        None => Err(invalid(path, "a string")),
    }
}

/// A 400 for the first key of `map` not in `allowed`.
pub fn known_keys(map: &Map<String, Value>, allowed: &[&str], base: &str) -> Result<(), ApiError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(key) => Err(ApiError::bad(
            join(base, key),
            format!("unknown field '{key}'"),
        )),
        None => Ok(()),
    }
}

/// Text blocks (`{"type": "text", "text": ...}`) at `path`, their texts joined with
/// "\n" (a tool result's content); a string is itself.
pub fn text_of(value: &Value, path: &str) -> Result<String, ApiError> {
    if let Some(text) = value.as_str() {
        return Ok(text.to_owned());
    }
    Ok(text_blocks(value, path)?.join("\n"))
}

/// The texts of a list of text blocks at `path` (any other block type is a 400).
fn text_blocks<'a>(value: &'a Value, path: &str) -> Result<Vec<&'a str>, ApiError> {
    let blocks = value
        .as_array()
        .ok_or_else(|| invalid(path, "a string or a list of text blocks"))?;
    let mut texts = Vec::with_capacity(blocks.len());
    for (k, block) in blocks.iter().enumerate() {
        let bpath = at(path, k);
        let map = object(block, &bpath)?;
        let kind = string(need(map, "type", &bpath)?, &join(&bpath, "type"))?;
        if kind != "text" {
            return Err(unsupported_block(&join(&bpath, "type"), kind, ""));
        }
        texts.push(text_block(map, &bpath)?);
    }
    Ok(texts)
}

/// A system text block that starts with this is Claude Code's per-request attribution
/// header: left out (as vLLM leaves it out), so the system prompt stays one cacheable
/// prefix.
pub const BILLING_HEADER: &str = "x-anthropic-billing-header";

/// A system prompt: a string, or text blocks concatenated (as vLLM joins them), the
/// billing header blocks left out (`strip_string`: a string that is the header is left
/// out too, as vLLM does for a system message but not for `system`).
pub fn system_text(value: &Value, path: &str, strip_string: bool) -> Result<String, ApiError> {
    if let Some(text) = value.as_str() {
        let header = strip_string && text.starts_with(BILLING_HEADER);
        return Ok(if header {
            String::new()
        } else {
            text.to_owned()
        });
    }
    let texts = text_blocks(value, path)?;
    Ok(texts
        .into_iter()
        .filter(|t| !t.starts_with(BILLING_HEADER))
        .collect())
}

/// The text of a text block at `path` (its `type` already read).
pub fn text_block<'a>(map: &'a Map<String, Value>, path: &str) -> Result<&'a str, ApiError> {
    known_keys(map, TEXT_KEYS, path)?;
    let text = string(need(map, "text", path)?, &join(path, "text"))?;
    cache_control(map, path)?;
    Ok(text)
}

/// `cache_control` of the object at `path` (`""`: the body), where Anthropic takes it:
/// `{"type": "ephemeral", "ttl"?: "5m" | "1h"}` or null; accepted and ignored (the prefix
/// cache needs no breakpoints).
pub fn cache_control(map: &Map<String, Value>, path: &str) -> Result<(), ApiError> {
    let Some(value) = get(map, "cache_control") else {
        return Ok(());
    };
    let at = join(path, "cache_control");
    let control = object(value, &at)?;
    known_keys(control, &["type", "ttl"], &at)?;
    one_of(
        need(control, "type", &at)?,
        &join(&at, "type"),
        &["ephemeral"],
    )?;
    if let Some(ttl) = get(control, "ttl") {
        one_of(ttl, &join(&at, "ttl"), &["5m", "1h"])?;
    }
    Ok(())
}

/// The keys a text block may have (`cache_control` and `citations` are accepted and
/// ignored).
pub const TEXT_KEYS: &[&str] = &["type", "text", "cache_control", "citations"];

/// The 400 of a block type this server does not take (`whose`: "" or " in a user
/// message" / " in an assistant message").
pub fn unsupported_block(path: &str, kind: &str, whose: &str) -> ApiError {
    ApiError::bad(
        path,
        format!("content block type '{kind}' is not supported{whose}"),
    )
}

/// A number.
pub fn number(value: &Value, path: &str) -> Result<(), ApiError> {
    if value.is_number() {
        Ok(())
    } else {
        Err(invalid(path, "a number"))
    }
}
