//! Which parsers a server uses: `--tool-call-parser` and `--reasoning-parser` checked, and
//! their `auto` choice from the chat template and the model's `config.json` by the rules of
//! `server/contracts/tool_formats.json` and `reasoning_formats.json`, with the reason logged
//! at start-up. Mirrors `server/parsers/select.py`. Behaviour: docs/api.md, "Parser
//! choice".

use std::fmt;
use std::path::Path;

use serde_json::Value;

use crate::parsers::reasoning;
use crate::parsers::tools::formats::{self, TemplateRule};

/// Every tool-call parser name (vLLM's), besides `auto` and `none`: the formats
/// [`crate::parsers::tools`] implements.
pub use crate::parsers::tools::PARSER_NAMES as TOOL_CALL_PARSERS;

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

/// The first of `rules` whose strings all appear in `source`, as a choice.
fn by_template(rules: &'static [TemplateRule], source: &str) -> Option<Choice> {
    let rule = rules
        .iter()
        .find(|r| r.all.iter().all(|m| source.contains(m.as_str())))?;
    Some(Choice {
        name: Some(rule.parser.as_str()),
        reason: format!("auto: chat template has {}", rule.all.join(" and ")),
    })
}

fn auto_tool_parser(template: Option<&str>, config: Option<&Value>) -> Choice {
    if let Some(choice) = template.and_then(|t| by_template(formats::template_rules(), t)) {
        return choice;
    }
    let family = config.and_then(model_family);
    if let Some((_, name)) = family
        .as_deref()
        .and_then(|f| formats::model_type_parsers().find(|(t, _)| same_family(t, f)))
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
        let names: Vec<&str> = reasoning::parser_names().collect();
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
        Some(other) => match reasoning::parser_names().find(|n| *n == other) {
            Some(name) => Ok(explicit(Some(name))),
            None => Err(format!(
                "reasoning_parser must be one of {}; got {other:?}",
                names()
            )),
        },
    }
}

fn auto_reasoning_parser(template: Option<&str>) -> Choice {
    by_template(reasoning::template_rules(), template.unwrap_or_default()).unwrap_or_else(|| {
        Choice {
            name: None,
            reason: "auto: the chat template has no reasoning markers; start with \
                     --reasoning-parser NAME to split reasoning out"
                .into(),
        }
    })
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
