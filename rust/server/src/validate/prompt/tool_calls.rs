//! An assistant message's `tool_calls` as the chat template sees them (vLLM's
//! `_postprocess_messages`): each call's `function.arguments` an object, not the JSON text a
//! client sends, since templates iterate it (`.items()`) or write it with `tojson`. Absent,
//! null or empty arguments become `{}`, an object is kept, a string is parsed as JSON; a
//! string that is not JSON, or JSON that is not an object, becomes `{}` with a warning
//! (history the client cannot fix must not fail every later turn). An entry that is not an
//! object, or not a call of type `function` with a `function` object, is a 400. Mirrors
//! `server/validate/tool_calls.py`.

use serde_json::{Map, Value};

use crate::edge::error::ApiError;

fn arguments(value: Option<Value>, param: &str) -> Map<String, Value> {
    let text = match value {
        Some(Value::Object(map)) => return map,
        Some(Value::String(text)) if !text.is_empty() => text,
        // absent, null, "" (and values no client sends: vLLM's rule)
        _ => return Map::new(),
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => map,
        Ok(_) => {
            tracing::warn!(
                "`{param}.function.arguments` is JSON but not an object; the chat template \
                 gets {{}}"
            );
            Map::new()
        }
        Err(_) => {
            tracing::warn!(
                "`{param}.function.arguments` is not valid JSON ({} chars); the chat template \
                 gets {{}}",
                text.chars().count()
            );
            Map::new()
        }
    }
}

fn bad_entry(param: String, what: &str) -> ApiError {
    let message = format!(
        "`{param}` is {what}; an assistant tool call must be an object with `type` \
         \"function\" and a `function` object"
    );
    ApiError::bad(param, message)
}

/// The calls of an assistant message (`param`: its `tool_calls` path) as the template
/// sees them.
pub(super) fn template_tool_calls(calls: Vec<Value>, param: &str) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::with_capacity(calls.len());
    for (j, call) in calls.into_iter().enumerate() {
        let at = format!("{param}[{j}]");
        let Value::Object(mut call) = call else {
            return Err(bad_entry(at, "not an object"));
        };
        let is_function = !matches!(call.get("type"), Some(t) if t != "function");
        let Some(Value::Object(mut function)) = call.remove("function").filter(|_| is_function)
        else {
            return Err(bad_entry(at, "not a function call"));
        };
        let args = arguments(function.remove("arguments"), &at);
        function.insert("arguments".into(), Value::Object(args));
        call.insert("function".into(), Value::Object(function));
        out.push(Value::Object(call));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn one(arguments: Value) -> Value {
        let call = json!({"id": "c1", "type": "function",
                          "function": {"name": "f", "arguments": arguments}});
        let out = template_tool_calls(vec![call], "messages[1].tool_calls").expect("a call");
        out[0]["function"]["arguments"].clone()
    }

    #[test]
    fn arguments_become_objects() {
        assert_eq!(
            one(json!("{\"b\": 1, \"a\": [2]}")),
            json!({"b": 1, "a": [2]})
        );
        assert_eq!(one(json!({"city": "東京"})), json!({"city": "東京"}));
        for empty in [json!(null), json!(""), json!({}), json!(0), json!([1])] {
            assert_eq!(one(empty.clone()), json!({}), "{empty}");
        }
        // not JSON, or JSON but not an object: {} (a warning, not an error)
        for text in [
            "{\"city\": ",
            "[1, 2]",
            "42",
            "\"x\"",
            "NaN",
            "{\"a\": NaN}",
        ] {
            assert_eq!(one(json!(text)), json!({}), "{text}");
        }
        // key order as written (the template's tojson keeps it)
        let keys: Vec<String> = one(json!("{\"z\": 1, \"a\": 2}"))
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        assert_eq!(keys, ["z", "a"]);
    }

    #[test]
    fn a_call_without_arguments_or_type_gets_them() {
        let calls = vec![json!({"id": "c1", "function": {"name": "f"}})];
        let out = template_tool_calls(calls, "messages[0].tool_calls").expect("a call");
        assert_eq!(
            out,
            [json!({"id": "c1", "function": {"name": "f", "arguments": {}}})]
        );
    }

    #[test]
    fn bad_entries_are_refused() {
        let cases = [
            (json!("call"), "not an object"),
            (
                json!({"type": "custom", "function": {"name": "f"}}),
                "not a function call",
            ),
            (
                json!({"type": null, "function": {"name": "f"}}),
                "not a function call",
            ),
            (json!({"type": "function"}), "not a function call"),
            (
                json!({"type": "function", "function": "f"}),
                "not a function call",
            ),
        ];
        for (call, what) in cases {
            let ok = json!({"function": {"name": "g"}});
            let err = template_tool_calls(vec![ok, call.clone()], "messages[2].tool_calls")
                .expect_err("refused");
            let ApiError::BadRequest { message, param } = err else {
                panic!("{call}: not a 400");
            };
            assert_eq!(
                param.as_deref(),
                Some("messages[2].tool_calls[1]"),
                "{call}"
            );
            assert!(message.starts_with(&format!("`messages[2].tool_calls[1]` is {what};")));
        }
    }
}
