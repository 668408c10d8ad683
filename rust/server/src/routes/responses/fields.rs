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

/// Chat request fields and the Responses fields they come from (prefixes).
const RENAMED: [(&str, &str); 4] = [
    ("max_completion_tokens", "max_output_tokens"),
    ("response_format.json_schema", "text.format"),
    ("response_format", "text.format"),
    ("reasoning_effort", "reasoning.effort"),
];

/// The Responses name of the chat request's field `param` (`messages` is `input`;
/// paths inside it are kept: chat messages do not map one to one onto input items).
pub fn responses_param(param: &str) -> String {
    if param == "messages" {
        return "input".into();
    }
    for (chat, ours) in RENAMED {
        if let Some(rest) = param.strip_prefix(chat) {
            if rest.is_empty() || rest.starts_with(['.', '[']) {
                return format!("{ours}{rest}");
            }
        }
    }
    // tools[i].function[.X] → tools[i][.X]
    if let Some((index, rest)) = param
        .strip_prefix("tools[")
        .and_then(|p| p.split_once("].function"))
    {
        let digits = !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit());
        if digits && (rest.is_empty() || rest.starts_with('.')) {
            return format!("tools[{index}]{rest}");
        }
    }
    param.to_owned()
}

/// The Responses name of a whole chat request field (a structured-output constraint's:
/// `response_format` is `text.format`).
pub fn responses_field(field: &'static str) -> &'static str {
    RENAMED
        .iter()
        .find(|(chat, _)| *chat == field)
        .map_or(field, |(_, ours)| ours)
}

/// The chat path's error with its `param` named as this API names it.
pub fn renamed(err: ApiError) -> ApiError {
    err.rename_param(responses_param)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_fields_get_their_responses_names() {
        let cases = [
            ("messages", "input"),
            ("messages[2].content", "messages[2].content"),
            ("max_completion_tokens", "max_output_tokens"),
            ("response_format.json_schema.schema", "text.format.schema"),
            ("response_format.json_schema", "text.format"),
            ("response_format", "text.format"),
            ("response_format.type", "text.format.type"),
            ("reasoning_effort", "reasoning.effort"),
            ("chat_template_kwargs", "chat_template_kwargs"),
            ("tools[3].function", "tools[3]"),
            ("tools[3].function.parameters", "tools[3].parameters"),
            ("tools[x].function", "tools[x].function"),
            ("tools[0].functions", "tools[0].functions"),
            ("max_completion_tokensx", "max_completion_tokensx"),
            ("temperature", "temperature"),
        ];
        for (chat, ours) in cases {
            assert_eq!(responses_param(chat), ours, "{chat}");
        }
        assert_eq!(responses_field("response_format"), "text.format");
        assert_eq!(responses_field("tools"), "tools");
        let err = renamed(ApiError::bad("max_completion_tokens", "m"));
        assert_eq!(err, ApiError::bad("max_output_tokens", "m"));
        assert_eq!(renamed(ApiError::Unauthorized), ApiError::Unauthorized);
    }
}
