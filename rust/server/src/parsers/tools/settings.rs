//! A chat request's tool settings: `tools`, `tool_choice` and `parallel_tool_calls`, each
//! checked with a 400 naming the field, into [`ToolSettings`]. Mirrors
//! `server/parsers/tools/settings.py`. Behaviour: docs/api.md, "Tool calls".

use serde_json::Value;

use crate::edge::error::ApiError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolMode {
    None,
    Auto,
    Required,
    Named,
}

/// A chat request's tool settings, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSettings {
    /// Given to the template.
    pub tools: Option<Vec<Value>>,
    pub mode: ToolMode,
    /// The named function.
    pub name: Option<String>,
    pub parallel: bool,
}

/// `tools` checked: a list of `{"type": "function", "function": {"name": ...}}`.
pub fn check_tools(tools: Option<&Value>) -> Result<Option<Vec<Value>>, ApiError> {
    let tools = match tools {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(tools)) => tools,
        Some(_) => {
            return Err(ApiError::bad(
                "tools",
                "invalid value for `tools`: expected a list of tools",
            ))
        }
    };
    for (i, tool) in tools.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(ApiError::bad(
                format!("tools[{i}]"),
                "a tool must be an object with `type` \"function\"",
            ));
        }
        let function = tool.get("function").filter(|f| f.is_object());
        if !function.is_some_and(|f| f.get("name").is_some_and(Value::is_string)) {
            return Err(ApiError::bad(
                format!("tools[{i}].function"),
                "a tool needs `function` with a string `name`",
            ));
        }
    }
    Ok(Some(tools.clone()))
}

/// Checks `tools`, `tool_choice` and `parallel_tool_calls` (400 naming the field).
pub fn tool_settings(
    tools: Option<&Value>,
    choice: Option<&Value>,
    parallel: Option<bool>,
    parser: Option<&str>,
) -> Result<ToolSettings, ApiError> {
    let tools = check_tools(tools)?;
    let names: Vec<&str> = tools
        .iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    let (mode, name) = match choice {
        None | Some(Value::Null) if names.is_empty() => (ToolMode::None, None),
        None | Some(Value::Null) => (ToolMode::Auto, None),
        Some(Value::String(s)) if s == "none" => (ToolMode::None, None),
        Some(Value::String(s)) if s == "auto" => (ToolMode::Auto, None),
        Some(Value::String(s)) if s == "required" => (ToolMode::Required, None),
        Some(v)
            if v.get("type").and_then(Value::as_str) == Some("function")
                && v.get("function").is_some_and(Value::is_object)
                && v["function"].get("name").is_some_and(Value::is_string) =>
        {
            (
                ToolMode::Named,
                v["function"]["name"].as_str().map(str::to_owned),
            )
        }
        Some(_) => {
            return Err(ApiError::bad(
                "tool_choice",
                "`tool_choice` must be \"none\", \"auto\", \"required\" or {\"type\": \
                 \"function\", \"function\": {\"name\": ...}}",
            ))
        }
    };
    let text = choice_text(mode, name.as_deref());
    if matches!(mode, ToolMode::Required | ToolMode::Named) && names.is_empty() {
        return Err(ApiError::bad(
            "tool_choice",
            format!("`tool_choice` {text} needs `tools`"),
        ));
    }
    if let Some(n) = &name {
        if !names.contains(&n.as_str()) {
            return Err(ApiError::bad(
                "tool_choice",
                format!("`tool_choice` names the function `{n}`, which is not in `tools`"),
            ));
        }
    }
    if mode != ToolMode::None && parser.is_none() {
        return Err(ApiError::bad(
            "tool_choice",
            format!(
                "`tool_choice` {text} needs a tool-call parser, and this server has none for \
                 its chat template; start it with --tool-call-parser"
            ),
        ));
    }
    Ok(ToolSettings {
        tools: tools.filter(|t| !t.is_empty()),
        mode,
        name,
        parallel: parallel.unwrap_or(true),
    })
}

/// How the messages name a `tool_choice`.
pub fn choice_text(mode: ToolMode, name: Option<&str>) -> String {
    match mode {
        ToolMode::Named => format!("naming `{}`", name.unwrap_or_default()),
        ToolMode::None => "\"none\"".into(),
        ToolMode::Auto => "\"auto\"".into(),
        ToolMode::Required => "\"required\"".into(),
    }
}
