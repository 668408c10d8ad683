//! Structured outputs: a request's `response_format` and `structured_outputs` checked, rule
//! for rule in the order of `server/validate/structured.py`, and lowered into the engine's
//! [`StructuredOutputs`] (JSON Schemas as compact JSON text, [`compact`]).
//! Behaviour: docs/api.md, "Structured outputs".

use serde_json::{Map, Value};
use vrs_wire::StructuredOutputs;

use crate::edge::error::ApiError;
use crate::parsers::tools::grammar::forced_tag;
use crate::parsers::tools::{choice_text, ToolFormat, ToolMode, ToolSettings};
use crate::validate::params::Settings;

pub mod guided;

pub const RESPONSE_FORMAT: &str = "response_format";
const SO: &str = "structured_outputs";

/// The constraint fields, in the order the one-constraint rule names them.
pub const CONSTRAINTS: [&str; 7] = [
    RESPONSE_FORMAT,
    "structured_outputs.json",
    "structured_outputs.regex",
    "structured_outputs.choice",
    "structured_outputs.grammar",
    "structured_outputs.json_object",
    "structured_outputs.structural_tag",
];

/// The name of a tool-forcing structural tag's constraint (the `param` of its engine
/// errors).
pub const TOOLS: &str = "tools";

const KINDS: [&str; 6] = [
    "json",
    "regex",
    "choice",
    "grammar",
    "json_object",
    "structural_tag",
];
const OPTIONS: [&str; 4] = [
    "disable_fallback",
    "disable_any_whitespace",
    "disable_additional_properties",
    "whitespace_pattern",
];
const ACCEPTED_TYPES: &str = "the accepted types are `text`, `json_object` and `json_schema`";

/// The options accepted only as null or true, with why false is refused.
const ONLY_TRUE: [(&str, &str); 2] = [
    (
        "disable_any_whitespace",
        "JSON is always generated without free whitespace",
    ),
    (
        "disable_additional_properties",
        "properties a schema does not name are never generated",
    ),
];

/// A request's structured-output constraint: the field that set it (the `param` of the
/// engine's compile errors) and what the engine enforces.
#[derive(Debug, Clone, PartialEq)]
pub struct Constraint {
    pub name: &'static str,
    pub spec: StructuredOutputs,
}

/// `value` as compact JSON text (keys in order, non-ASCII kept).
pub fn compact(value: &Value) -> String {
    // A `Value` always serializes; the fallback is never taken.
    serde_json::to_string(value).unwrap_or_default()
}

/// The request's one constraint (`None`: free text), or a 400.
pub fn constraint(
    response_format: Option<&Value>,
    structured_outputs: Option<&Value>,
) -> Result<Option<Constraint>, ApiError> {
    let mut found = Vec::new();
    if let Some(spec) = response_format_spec(response_format)? {
        found.push(Constraint {
            name: RESPONSE_FORMAT,
            spec,
        });
    }
    found.extend(structured_outputs_specs(structured_outputs)?);
    one_constraint(found)
}

/// The one constraint of `found` (`None`: none), or the 400 naming the second.
fn one_constraint(mut found: Vec<Constraint>) -> Result<Option<Constraint>, ApiError> {
    if found.len() > 1 {
        let names: Vec<String> = found.iter().map(|c| format!("`{}`", c.name)).collect();
        let listed = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => names.concat(),
        };
        return Err(ApiError::bad(
            found[1].name,
            format!(
                "only one structured-output constraint may be given; this request sets {listed}"
            ),
        ));
    }
    Ok(found.pop())
}

/// The body's constraint (its `guided_*` fields' when it has any: [`guided`]) checked into
/// `settings` (after the sampling fields' checks).
pub fn apply(body: &Value, settings: &mut Settings) -> Result<(), ApiError> {
    let found = match guided::constraint(body)? {
        Some(found) => Some(found),
        None => constraint(body.get(RESPONSE_FORMAT), body.get(SO))?,
    };
    if let Some(found) = found {
        settings.sampling.structured_outputs = Some(found.spec);
        settings.constraint = Some(found.name);
    }
    Ok(())
}

/// A chat request's tools against its constraint: a forcing `tool_choice` cannot be
/// combined with one (400); otherwise a forced call's format (`format`: the active
/// parser's, when tool calls are parsed) becomes the constraint, named [`TOOLS`].
pub fn with_tools(
    tools: &ToolSettings,
    format: Option<ToolFormat>,
    settings: &mut Settings,
) -> Result<(), ApiError> {
    if !matches!(tools.mode, ToolMode::Required | ToolMode::Named) {
        return Ok(());
    }
    if let Some(name) = settings.constraint {
        return Err(ApiError::bad(
            "tool_choice",
            format!(
                "`tool_choice` {} cannot be combined with `{name}`",
                choice_text(tools.mode, tools.name.as_deref())
            ),
        ));
    }
    if let Some(tag) = format.and_then(|f| forced_tag(f, tools)) {
        settings.sampling.structured_outputs = Some(StructuredOutputs {
            structural_tag: Some(tag),
            ..Default::default()
        });
        settings.constraint = Some(TOOLS);
    }
    Ok(())
}

/// `response_format` checked (`None`: plain text).
pub fn response_format_spec(value: Option<&Value>) -> Result<Option<StructuredOutputs>, ApiError> {
    let value = match value {
        None | Some(Value::Null) => return Ok(None),
        Some(value) => value,
    };
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Err(ApiError::bad(
            RESPONSE_FORMAT,
            format!("`{RESPONSE_FORMAT}` must be an object with a string `type`; {ACCEPTED_TYPES}"),
        ));
    };
    match kind {
        "text" => return Ok(None),
        "json_object" => {
            return Ok(Some(StructuredOutputs {
                json_object: true,
                ..Default::default()
            }))
        }
        "json_schema" => {}
        other => {
            return Err(ApiError::bad(
                RESPONSE_FORMAT,
                format!("`{RESPONSE_FORMAT}` of type `{other}` is not supported; {ACCEPTED_TYPES}"),
            ))
        }
    }
    let field = "response_format.json_schema";
    let Some(inner) = value.get("json_schema").and_then(Value::as_object) else {
        return Err(ApiError::bad(
            field,
            format!("`{field}` must be an object with `name` and `schema`"),
        ));
    };
    let Some(schema) = inner.get("schema").filter(|s| s.is_object()) else {
        return Err(ApiError::bad(
            "response_format.json_schema.schema",
            format!("`{field}.schema` must be a JSON Schema object"),
        ));
    };
    if !inner.get("name").is_some_and(Value::is_string) {
        return Err(ApiError::bad(
            "response_format.json_schema.name",
            format!("`{field}.name` must be a string"),
        ));
    }
    Ok(Some(StructuredOutputs {
        json: Some(compact(schema)),
        ..Default::default()
    }))
}

/// `text` parsed as JSON when it holds an object.
fn json_object(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_object)
}

/// The constraint name of `structured_outputs.<key>` (`key` one of [`KINDS`]).
fn name_of(key: &str) -> &'static str {
    CONSTRAINTS
        .iter()
        .find(|name| name.strip_prefix("structured_outputs.") == Some(key))
        .copied()
        .unwrap_or(SO)
}

/// The 400 of `structured_outputs.<key>`.
fn fail(key: &str, message: String) -> ApiError {
    ApiError::bad(format!("{SO}.{key}"), message)
}

/// `structured_outputs` checked: the constraints it sets (one per key set; the caller
/// refuses more than one).
pub fn structured_outputs_specs(value: Option<&Value>) -> Result<Vec<Constraint>, ApiError> {
    let map = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map,
        Some(_) => {
            return Err(ApiError::bad(SO, format!("`{SO}` must be an object")));
        }
    };
    let mut unknown: Vec<&str> = map
        .keys()
        .map(String::as_str)
        .filter(|k| !KINDS.contains(k) && !OPTIONS.contains(k))
        .collect();
    unknown.sort_unstable();
    if let Some(key) = unknown.first() {
        return Err(fail(key, format!("unknown field `{key}` in `{SO}`")));
    }
    let mut found = Vec::new();
    for key in KINDS {
        let Some(value) = map.get(key).filter(|v| !v.is_null()) else {
            continue;
        };
        if let Some(spec) = kind_spec(key, value)? {
            found.push(Constraint {
                name: name_of(key),
                spec,
            });
        }
    }
    check_options(map)?;
    if found.is_empty() {
        return Err(ApiError::bad(
            SO,
            format!(
                "`{SO}` must set one of `json`, `regex`, `choice`, `grammar`, `json_object` \
                 or `structural_tag`"
            ),
        ));
    }
    Ok(found)
}

/// The spec of one constraint key's (non-null) value; `None`: `json_object` false.
fn kind_spec(key: &str, value: &Value) -> Result<Option<StructuredOutputs>, ApiError> {
    let mut spec = StructuredOutputs::default();
    match key {
        "json" => {
            let schema = match value {
                Value::String(text) => json_object(text),
                Value::Object(_) => Some(value.clone()),
                _ => None,
            };
            let Some(schema) = schema else {
                return Err(fail(
                    key,
                    format!(
                        "`{SO}.json` must be a JSON Schema (an object, or a string holding one)"
                    ),
                ));
            };
            spec.json = Some(compact(&schema));
        }
        "regex" => match value {
            Value::String(regex) => spec.regex = Some(regex.clone()),
            _ => return Err(fail(key, format!("`{SO}.regex` must be a string"))),
        },
        "choice" => {
            let choices: Option<Vec<String>> = value
                .as_array()
                .filter(|list| !list.is_empty())
                .and_then(|list| {
                    list.iter()
                        .map(|item| item.as_str().map(str::to_owned))
                        .collect()
                });
            let Some(choices) = choices else {
                return Err(fail(
                    key,
                    format!("`{SO}.choice` must be a non-empty list of strings"),
                ));
            };
            spec.choice = Some(choices);
        }
        "grammar" => match value.as_str().filter(|g| !g.is_empty()) {
            Some(grammar) => spec.grammar = Some(grammar.to_owned()),
            None => {
                return Err(fail(
                    key,
                    format!("`{SO}.grammar` must be a non-empty string (EBNF)"),
                ))
            }
        },
        "json_object" => match value {
            Value::Bool(true) => spec.json_object = true,
            Value::Bool(false) => return Ok(None),
            _ => return Err(fail(key, format!("`{SO}.json_object` must be a boolean"))),
        },
        _ => match value.as_str().filter(|tag| json_object(tag).is_some()) {
            Some(tag) => spec.structural_tag = Some(tag.to_owned()),
            None => {
                return Err(fail(
                    key,
                    format!("`{SO}.structural_tag` must be a string holding a JSON object"),
                ))
            }
        },
    }
    Ok(Some(spec))
}

/// The options vLLM takes next to the constraint: accepted where they change nothing.
fn check_options(map: &Map<String, Value>) -> Result<(), ApiError> {
    for key in ["disable_fallback", ONLY_TRUE[0].0, ONLY_TRUE[1].0] {
        match map.get(key) {
            None | Some(Value::Null) | Some(Value::Bool(true)) => {}
            Some(Value::Bool(false)) => {
                if let Some((_, why)) = ONLY_TRUE.iter().find(|(k, _)| *k == key) {
                    return Err(fail(
                        key,
                        format!("`{SO}.{key}: false` is not supported: {why}"),
                    ));
                }
            }
            Some(_) => return Err(fail(key, format!("`{SO}.{key}` must be a boolean"))),
        }
    }
    match map.get("whitespace_pattern") {
        None | Some(Value::Null) => Ok(()),
        Some(_) => Err(fail(
            "whitespace_pattern",
            format!("`{SO}.whitespace_pattern` is not supported"),
        )),
    }
}

#[cfg(test)]
mod tests;
