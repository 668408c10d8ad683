//! The grammar of a forced tool call: under `tool_choice` `required` or a named function the
//! engine enforces the call format as an xgrammar structural tag (compact JSON text): the
//! format's own calls after the prompt's [`prefill`](super::prefill) for `demo` and `hermes`
//! ([`forced_tag`]), vLLM's format-independent JSON forcing for the others
//! ([`forced_json_tag`]). Mirrors `server/parsers/tools/grammar.py`. Behaviour: docs/api.md,
//! "Tool calls".

use serde_json::{json, Value};

use super::{call_prefix, ToolFormat, ToolMode, ToolSettings};

/// The start of a forced JSON call, up to its parameters.
fn json_prefix(name: &str) -> String {
    format!(
        "{{\"name\": {}, \"parameters\": ",
        Value::String(name.to_owned())
    )
}

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
    let Some((begin, end)) = format.native() else {
        return forced_json_tag(settings);
    };
    let tools = settings.tools.as_deref().unwrap_or_default();
    let close = || constant(format!("}}{end}"));
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
                let more = sequence(vec![constant(begin.to_owned()), any.clone()]);
                sequence(vec![any, json!({"type": "star", "content": more})])
            } else {
                any
            }
        }
        ToolMode::None | ToolMode::Auto => return None,
    };
    Some(tag(form))
}

/// Compact JSON text (keys in order); a `Value` always serializes.
fn tag(form: Value) -> String {
    serde_json::to_string(&json!({"type": "structural_tag", "format": form})).unwrap_or_default()
}

/// vLLM's format-independent forcing: the named function's arguments, or a JSON list of
/// calls.
pub fn forced_json_tag(settings: &ToolSettings) -> Option<String> {
    let tools = settings.tools.as_deref().unwrap_or_default();
    let form = match settings.mode {
        ToolMode::Named => {
            let tool = tools
                .iter()
                .find(|t| t["function"]["name"].as_str() == settings.name.as_deref())?;
            arguments(tool)
        }
        ToolMode::Required => {
            let mut calls: Vec<Value> = tools
                .iter()
                .map(|t| {
                    let name = t["function"]["name"].as_str().unwrap_or_default();
                    sequence(vec![
                        constant(json_prefix(name)),
                        arguments(t),
                        constant("}".into()),
                    ])
                })
                .collect();
            let any = if calls.len() == 1 {
                calls.remove(0)
            } else {
                json!({"type": "or", "elements": calls})
            };
            let mut list = vec![constant("[".into()), any.clone()];
            if settings.parallel {
                let more = sequence(vec![constant(", ".into()), any]);
                list.push(json!({"type": "star", "content": more}));
            }
            list.push(constant("]".into()));
            sequence(list)
        }
        ToolMode::None | ToolMode::Auto => return None,
    };
    Some(tag(form))
}

#[cfg(test)]
mod tests;
