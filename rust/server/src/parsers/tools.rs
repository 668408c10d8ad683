//! Tool calling: the request's `tools` / `tool_choice`, the prompt prefill that forces
//! a call, and the streaming parser that turns generated text into tool calls.
//!
//! Mirrors `server/parsers/tools/__init__.py` rule for rule. Formats (`--tool-call-parser`):
//! `demo` (`<｜tool▁call▁begin｜>{"name": N, "arguments": A}<｜tool▁call▁end｜>`, the demo
//! template's) and `hermes` (`<tool_call>…</tool_call>`); which one a server uses is
//! [`crate::parsers::select`]'s choice. `tool_choice`: `none` (tools rendered, output not
//! parsed), `auto` (parsed, never forced), `required` (the prompt is prefilled with the
//! begin marker), a named function (prefilled up to its arguments; generation stops at
//! the first end marker). A call body must be a JSON object with a string `name` and an
//! `arguments` value (raw JSON text kept byte for byte; a JSON string gives its text);
//! otherwise the text goes back as content, exactly as generated.
//! `parallel_tool_calls: false` keeps the first call only. Under `required` and a named
//! function the engine also enforces the call format after the prefill ([`grammar`]).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::edge::error::ApiError;
use crate::parsers::markers::held_suffix;

pub mod grammar;

/// The markers of one tool-call format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolFormat {
    pub begin: &'static str,
    pub end: &'static str,
}

/// The formats parsed, by parser name (every name: [`crate::parsers::select::TOOL_CALL_PARSERS`];
/// a name without a format here is accepted and parses nothing).
pub const TOOL_CALL_PARSERS: &[(&str, ToolFormat)] = &[
    (
        "demo",
        ToolFormat {
            begin: "<｜tool▁call▁begin｜>",
            end: "<｜tool▁call▁end｜>",
        },
    ),
    (
        "hermes",
        ToolFormat {
            begin: "<tool_call>",
            end: "</tool_call>",
        },
    ),
];

/// The format of a parser name.
pub fn format_of(name: &str) -> Option<ToolFormat> {
    TOOL_CALL_PARSERS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, f)| *f)
}

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

/// Text appended to the prompt to force a call (`None`: nothing is forced).
pub fn prefill(format: ToolFormat, settings: &ToolSettings) -> Option<String> {
    match settings.mode {
        ToolMode::Required => Some(format.begin.to_owned()),
        ToolMode::Named => Some(format!(
            "{}{}",
            format.begin,
            call_prefix(settings.name.as_deref().unwrap_or_default())
        )),
        ToolMode::None | ToolMode::Auto => None,
    }
}

/// The start of a named call's body, up to its arguments.
pub fn call_prefix(name: &str) -> String {
    let quoted = serde_json::to_string(name).unwrap_or_else(|_| format!("{name:?}"));
    format!("{{\"name\": {quoted}, \"arguments\": ")
}

/// One parsed tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

fn new_call_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("call_{}", &hex[..24])
}

const JSON_WS: &[char] = &[' ', '\t', '\n', '\r'];

#[derive(Deserialize)]
struct CallBody<'a> {
    name: String,
    #[serde(borrow)]
    arguments: &'a RawValue,
}

/// `(name, arguments)` of a call body, or `None` when it is not a valid call.
pub fn parse_call(body: &str) -> Option<(String, String)> {
    if !body.trim_start_matches(JSON_WS).starts_with('{') {
        return None;
    }
    let call: CallBody<'_> = serde_json::from_str(body).ok()?;
    let raw = call.arguments.get();
    let arguments = if raw.starts_with('"') {
        serde_json::from_str::<String>(raw).ok()?
    } else {
        raw.to_owned()
    };
    Some((call.name, arguments))
}

/// Splits streamed text into content and tool calls (see the module docs).
#[derive(Debug)]
pub struct ToolCallParser {
    format: ToolFormat,
    parallel: bool,
    buffer: String,
    in_call: bool,
    /// The current call's opener came from the prompt.
    forced: bool,
    /// The part of the current call's body the prompt wrote.
    given: String,
    pub calls_made: usize,
}

impl ToolCallParser {
    pub fn new(format: ToolFormat, settings: &ToolSettings) -> Self {
        let forced = prefill(format, settings);
        Self {
            format,
            parallel: settings.parallel,
            buffer: String::new(),
            in_call: forced.is_some(),
            forced: forced.is_some(),
            given: forced
                .map(|f| f[format.begin.len()..].to_owned())
                .unwrap_or_default(),
            calls_made: 0,
        }
    }

    /// (content to emit now, calls completed by this piece).
    pub fn push(&mut self, text: &str) -> (String, Vec<ToolCall>) {
        self.buffer.push_str(text);
        let mut content = String::new();
        let mut calls = Vec::new();
        let format = self.format;
        loop {
            if self.in_call {
                let Some(end) = self.buffer.find(format.end) else {
                    break;
                };
                let rest = self.buffer.split_off(end + format.end.len());
                let mut body = std::mem::replace(&mut self.buffer, rest);
                body.truncate(end);
                self.close(&body, format.end, &mut content, &mut calls);
            } else {
                let Some(begin) = self.buffer.find(format.begin) else {
                    let keep = held_suffix(&self.buffer, format.begin);
                    let held = self.buffer.split_off(self.buffer.len() - keep);
                    content.push_str(&std::mem::replace(&mut self.buffer, held));
                    break;
                };
                content.push_str(&self.buffer[..begin]);
                self.buffer.drain(..begin + format.begin.len());
                self.in_call = true;
            }
        }
        (content, calls)
    }

    /// The end of the output: an unterminated call is parsed as it stands.
    pub fn finish(&mut self) -> (String, Vec<ToolCall>) {
        let mut content = String::new();
        let mut calls = Vec::new();
        let buffer = std::mem::take(&mut self.buffer);
        if self.in_call {
            self.close(&buffer, "", &mut content, &mut calls);
        } else {
            content.push_str(&buffer);
        }
        (content, calls)
    }

    fn close(
        &mut self,
        generated: &str,
        end: &str,
        content: &mut String,
        calls: &mut Vec<ToolCall>,
    ) {
        let forced = std::mem::replace(&mut self.forced, false);
        let given = std::mem::take(&mut self.given);
        self.in_call = false;
        let Some((name, arguments)) = parse_call(&format!("{given}{generated}")) else {
            if !forced {
                content.push_str(self.format.begin);
            }
            content.push_str(generated);
            content.push_str(end);
            return;
        };
        if self.calls_made > 0 && !self.parallel {
            return;
        }
        self.calls_made += 1;
        calls.push(ToolCall {
            id: new_call_id(),
            name,
            arguments,
        });
    }
}

#[cfg(test)]
mod tests;
