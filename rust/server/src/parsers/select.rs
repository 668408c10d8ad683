//! Which parsers a server uses: `--tool-call-parser` and `--reasoning-parser` checked, and
//! their `auto` choice from the chat template and the model's `config.json`, with the reason
//! logged at start-up. Mirrors `server/parsers/select.py`. Behaviour: docs/api.md, "Parser
//! choice".

use std::fmt;
use std::path::Path;

use serde_json::Value;

use crate::parsers::reasoning::REASONING_PARSERS;

/// Every tool-call parser name (vLLM's), besides `auto` and `none`: the formats
/// [`crate::parsers::tools`] implements.
pub use crate::parsers::tools::PARSER_NAMES as TOOL_CALL_PARSERS;

/// Template markers → tool-call parser, in order (every marker of an entry must appear).
const TEMPLATE_TOOL_MARKERS: &[(&[&str], &str)] = &[
    (&["<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>"], "deepseek_v3"),
    (&["<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"], "demo"),
    (&["<function=", "<parameter="], "qwen3_coder"),
    (&["<tool_call>", "</tool_call>"], "hermes"),
    (&["<|tool_call|>"], "granite"),
    (&["[TOOL_CALLS]"], "mistral"),
    (&["<|python_start|>"], "pythonic"),
    (&["[func_name1("], "pythonic"),
    (&["<|python_tag|>"], "llama3_json"),
];

/// `config.json` `model_type` → tool-call parser.
const MODEL_TYPE_TOOLS: &[(&str, &str)] = &[
    ("qwen2", "hermes"),
    ("qwen2_moe", "hermes"),
    ("qwen3", "hermes"),
    ("qwen3_moe", "hermes"),
    ("deepseek_v3", "deepseek_v3"),
    ("mistral", "mistral"),
    ("mistral3", "mistral"),
    ("mixtral", "mistral"),
    ("granite", "granite"),
    ("granitemoe", "granite"),
    ("llama", "llama3_json"),
    ("llama4", "pythonic"),
];

/// A parser chosen, and why (for the start-up log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    pub name: Option<&'static str>,
    pub reason: String,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name.unwrap_or("none"), self.reason)
    }
}

fn explicit(name: Option<&'static str>) -> Choice {
    Choice {
        name,
        reason: "explicit".into(),
    }
}

/// The `--tool-call-parser` value checked (`None` is `auto`).
pub fn check_tool_setting(setting: Option<&str>) -> Result<(), String> {
    tool_parser(setting, None, None).map(|_| ())
}

/// The `--reasoning-parser` value checked (`None` is `auto`).
pub fn check_reasoning_setting(setting: Option<&str>) -> Result<(), String> {
    reasoning_parser(setting, None).map(|_| ())
}

/// The tool-call parser for `setting` (`None` / `auto`: from `template`, then `config`,
/// the model's `config.json`).
pub fn tool_parser(
    setting: Option<&str>,
    template: Option<&str>,
    config: Option<&Value>,
) -> Result<Choice, String> {
    match setting {
        None | Some("auto") => Ok(auto_tool_parser(template, config)),
        Some("none") => Ok(explicit(None)),
        Some(other) => match TOOL_CALL_PARSERS.iter().find(|n| **n == other) {
            Some(name) => Ok(explicit(Some(name))),
            None => Err(format!(
                "tool_call_parser must be one of auto, none, {}; got {other:?}",
                TOOL_CALL_PARSERS.join(", ")
            )),
        },
    }
}

fn auto_tool_parser(template: Option<&str>, config: Option<&Value>) -> Choice {
    if let Some(source) = template {
        for (markers, name) in TEMPLATE_TOOL_MARKERS {
            if markers.iter().all(|m| source.contains(m)) {
                return Choice {
                    name: Some(name),
                    reason: format!("auto: chat template has {}", markers.join(" and ")),
                };
            }
        }
    }
    let family = config.and_then(model_family);
    if let Some((_, name)) = family
        .as_deref()
        .and_then(|f| MODEL_TYPE_TOOLS.iter().find(|(t, _)| same_family(t, f)))
    {
        return Choice {
            name: Some(name),
            reason: format!(
                "auto: config.json model_type {}",
                family.as_deref().unwrap_or_default()
            ),
        };
    }
    let family = family.unwrap_or_else(|| "unknown: no config.json model_type".into());
    let harmony = if family == "gpt_oss" {
        "; its OpenAI harmony format is not supported"
    } else {
        ""
    };
    Choice {
        name: None,
        reason: format!(
            "auto: no tool-call parser for this model (model_type {family}){harmony}; \
             start with --tool-call-parser NAME to parse tool calls"
        ),
    }
}

/// `model_type`, else the first architecture lower-cased up to `For`.
fn model_family(config: &Value) -> Option<String> {
    if let Some(t) = config.get("model_type").and_then(Value::as_str) {
        return Some(t.to_owned());
    }
    let arch = config.get("architectures")?.get(0)?.as_str()?;
    let stem = arch.find("For").map_or(arch, |at| &arch[..at]);
    Some(stem.to_lowercase())
}

/// `model_type` `known` names `family` (architecture stems have no underscores).
fn same_family(known: &str, family: &str) -> bool {
    known == family || known.replace('_', "") == family
}

/// The reasoning parser for `setting` (`None` / `auto`: from `template`).
pub fn reasoning_parser(setting: Option<&str>, template: Option<&str>) -> Result<Choice, String> {
    let names = || {
        let names: Vec<&str> = REASONING_PARSERS.iter().map(|(n, _)| *n).collect();
        format!("auto, none, {}", names.join(", "))
    };
    match setting {
        None | Some("auto") => Ok(auto_reasoning_parser(template)),
        Some("none") => Ok(explicit(None)),
        Some("openai") => Err(format!(
            "reasoning_parser openai (gpt-oss harmony channels) is not supported by vrs; \
             use one of {}",
            names()
        )),
        Some(other) => match REASONING_PARSERS.iter().find(|(n, _)| *n == other) {
            Some((name, _)) => Ok(explicit(Some(name))),
            None => Err(format!(
                "reasoning_parser must be one of {}; got {other:?}",
                names()
            )),
        },
    }
}

fn auto_reasoning_parser(template: Option<&str>) -> Choice {
    let source = template.unwrap_or_default();
    let (name, marker) = if source.contains("[THINK]") {
        (Some("mistral"), "[THINK]")
    } else if source.contains("<think>") && source.contains("enable_thinking") {
        (Some("qwen3"), "<think> and enable_thinking")
    } else if source.contains("<think>") {
        (Some("deepseek_r1"), "<think>")
    } else if source.contains("thought process") {
        (Some("granite"), "thought process")
    } else {
        (None, "")
    };
    Choice {
        name,
        reason: match name {
            Some(_) => format!("auto: chat template has {marker}"),
            None => "auto: the chat template has no reasoning markers; start with \
                     --reasoning-parser NAME to split reasoning out"
                .into(),
        },
    }
}

/// Both parsers for their settings, each logged at start-up with its reason
/// (`tool-call parser: hermes (auto: chat template has …)`).
pub fn choose(
    tool_setting: Option<&str>,
    reasoning_setting: Option<&str>,
    template: Option<&str>,
    config: Option<&Value>,
) -> Result<(Choice, Choice), String> {
    let tools = tool_parser(tool_setting, template, config)?;
    let reasoning = reasoning_parser(reasoning_setting, template)?;
    tracing::info!("tool-call parser: {tools}");
    tracing::info!("reasoning parser: {reasoning}");
    Ok((tools, reasoning))
}

/// The model directory's `config.json` (`None` when missing or not JSON: `auto` then
/// goes by the chat template alone).
pub fn model_config(dir: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join("config.json")).ok()?;
    serde_json::from_str::<Value>(&text)
        .ok()
        .filter(Value::is_object)
}

#[cfg(test)]
mod tests;
