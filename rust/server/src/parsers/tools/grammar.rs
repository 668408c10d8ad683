//! The grammar of a forced tool call: under `tool_choice` `required` or a named function
//! the engine also enforces the call format after the prompt's [`prefill`](super::prefill), as an
//! xgrammar structural tag (compact JSON text): each call's arguments follow its
//! function's `parameters` (an object without properties when it has none), at most one
//! whitespace in a row; with `parallel_tool_calls` false, one call. Mirrors `forced_tag`
//! in `server/parsers/tools/__init__.py`.

use serde_json::{json, Value};

use super::{call_prefix, ToolFormat, ToolMode, ToolSettings};

/// The structural-tag element of a call's arguments.
fn arguments(tool: &Value) -> Value {
    let schema = tool["function"]
        .get("parameters")
        .filter(|p| p.is_object())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    json!({"type": "json_schema", "json_schema": schema, "max_whitespace_cnt": 1})
}

fn constant(value: String) -> Value {
    json!({"type": "const_string", "value": value})
}

fn sequence(elements: Vec<Value>) -> Value {
    json!({"type": "sequence", "elements": elements})
}

/// The structural tag that constrains what follows the [`prefill`](super::prefill) of a
/// forced call (`None`: nothing is forced).
pub fn forced_tag(format: ToolFormat, settings: &ToolSettings) -> Option<String> {
    let tools = settings.tools.as_deref().unwrap_or_default();
    let close = || constant(format!("}}{}", format.end));
    let form = match settings.mode {
        ToolMode::Named => {
            let tool = tools
                .iter()
                .find(|t| t["function"]["name"].as_str() == settings.name.as_deref())?;
            sequence(vec![arguments(tool), close()])
        }
        ToolMode::Required => {
            let mut calls: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let name = t["function"]["name"].as_str().unwrap_or_default();
                    sequence(vec![constant(call_prefix(name)), arguments(t), close()])
                })
                .collect();
            let any = if calls.len() == 1 {
                calls.remove(0)
            } else {
                json!({"type": "or", "elements": calls})
            };
            if settings.parallel {
                let more = sequence(vec![constant(format.begin.to_owned()), any.clone()]);
                sequence(vec![any, json!({"type": "star", "content": more})])
            } else {
                any
            }
        }
        ToolMode::None | ToolMode::Auto => return None,
    };
    // Compact JSON text (keys in order); a `Value` always serializes.
    Some(
        serde_json::to_string(&json!({"type": "structural_tag", "format": form}))
            .unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests;
