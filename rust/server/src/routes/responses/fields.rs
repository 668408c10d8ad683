//! Typed access to a request's JSON fields: each miss a 400 naming the field's path,
//! in the Responses API's words (`invalid value for 'PATH': expected …`).

use serde_json::{Map, Value};

use crate::edge::error::ApiError;

/// A 400 naming `param`.
pub fn bad(param: impl Into<String>, message: impl Into<String>) -> ApiError {
    ApiError::bad(param, message)
}

/// A 400: `path` holds no value of the `expected` kind.
pub fn invalid(path: &str, expected: &str) -> ApiError {
    bad(
        path,
        format!("invalid value for '{path}': expected {expected}"),
    )
}

/// The string at `path` (absent is a 400 too).
pub fn string<'a>(value: Option<&'a Value>, path: &str) -> Result<&'a str, ApiError> {
    value
        .and_then(Value::as_str)
        .ok_or_else(|| invalid(path, "a string"))
}

/// The object at `path` (absent is a 400 too).
pub fn object<'a>(
    value: Option<&'a Value>,
    path: &str,
) -> Result<&'a Map<String, Value>, ApiError> {
    value
        .and_then(Value::as_object)
        .ok_or_else(|| invalid(path, "an object"))
}

/// The list at `path` (absent is a 400 too).
pub fn list<'a>(value: Option<&'a Value>, path: &str) -> Result<&'a Vec<Value>, ApiError> {
    value
        .and_then(Value::as_array)
        .ok_or_else(|| invalid(path, "an array"))
}

pub fn boolean(value: &Value, path: &str) -> Result<bool, ApiError> {
    value.as_bool().ok_or_else(|| invalid(path, "a boolean"))
}

/// A 400 for the first key of the object at `at` that is not in `known`.
pub fn known_keys(object: &Map<String, Value>, known: &[&str], at: &str) -> Result<(), ApiError> {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => Err(bad(
            format!("{at}.{key}"),
            format!("unknown field '{at}.{key}'"),
        )),
        None => Ok(()),
    }
}
