//! The model's chat template, rendered by minijinja the way transformers renders it
//! with jinja2 (`apply_chat_template(..., tokenize=False)`).
//!
//! Parity is tested against transformers itself (`template/tests.rs`, `template/filters/tests.rs`).
//! Known differences: `none | length` is 0 (jinja2 raises); Python's `'%s' % x` string
//! formatting is not supported (a template error; use `~` or `format`); tuple literals
//! such as `(1, 2)` print as lists (tuples that methods and filters return print as
//! tuples); `pprint` prints minijinja's debug form and a printed `dict.items()` lacks
//! Python's `dict_items(...)` wrapper.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use minijinja::{Environment, Value};
use serde_json::Value as Json;

use crate::config::{read_to_string, TokenizerConfig};
use crate::error::{Result, TextError};
use crate::template::content_format::{ContentFormat, ContentFormatOption};
use crate::template::jinja::{describe, environment, strip_generation_tags};

pub mod content_format;
mod filters;
mod jinja;
mod pyjson;
mod pymethods;
mod tuple;

/// What transformers appends to the final message to find it again after rendering.
const CONTINUE_TAG: &str = "CONTINUE_FINAL_MESSAGE_TAG ";
/// Names the caller's kwargs may not set: the template's own inputs and
/// `apply_chat_template`'s arguments (the Python frontend's `RESERVED_TEMPLATE_KWARGS`).
const RESERVED: [&str; 16] = [
    "messages",
    "tools",
    "documents",
    "add_generation_prompt",
    "conversation",
    "chat_template",
    "continue_final_message",
    "tokenize",
    "sanitize_control_tokens",
    "padding",
    "truncation",
    "max_length",
    "return_tensors",
    "return_dict",
    "return_assistant_tokens_mask",
    "tokenizer_kwargs",
];

/// Everything a chat template render needs from one request.
#[derive(Debug, Clone, Default)]
pub struct ChatTemplateInput {
    /// The conversation: JSON objects with `role`, `content`, ...
    pub messages: Vec<Json>,
    /// Tool definitions (`None` renders as `tools = none`).
    pub tools: Option<Vec<Json>>,
    /// RAG documents (`None` renders as `documents = none`).
    pub documents: Option<Vec<Json>>,
    /// Append the assistant header.
    pub add_generation_prompt: bool,
    /// End the prompt inside the final (assistant) message so the model continues it.
    pub continue_final_message: bool,
    /// Extra template variables (`chat_template_kwargs`, e.g. `enable_thinking`); they
    /// override the special-token variables.
    pub kwargs: serde_json::Map<String, Json>,
}

/// A compiled chat template; cheap to clone and share across threads.
#[derive(Clone)]
pub struct ChatTemplate {
    inner: Arc<Inner>,
    /// `--chat-template-content-format`; `None` (what [`ChatTemplate::new`] gives): the
    /// content goes to the template as given, as transformers takes it.
    content_format: Option<ContentFormatOption>,
}

struct Inner {
    env: Environment<'static>,
    has_tool_use: bool,
    mentions_content: bool,
    /// The detected content format of the `default` template, and of `tool_use`.
    detected: [ContentFormat; 2],
    /// [`ChatTemplate::merges_inline_system`], found on first use.
    merges_inline_system: OnceLock<bool>,
    special_tokens: Vec<(String, Value)>,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("has_tool_use", &self.inner.has_tool_use)
            .finish()
    }
}

impl ChatTemplate {
    /// Compiles one template source; `special_tokens` (name → text, e.g. `bos_token`)
    /// become template variables.
    pub fn new(source: &str, special_tokens: &[(String, String)]) -> Result<Self> {
        Self::from_named(&[("default".to_owned(), source.to_owned())], special_tokens)
    }

    /// The model's template: `override_path` when given, else `chat_template.jinja` or
    /// `tokenizer_config.json`'s `chat_template` (as [`TokenizerConfig`] resolved them).
    /// A `tool_use` template, when present, is used for requests with tools.
    pub fn from_config(config: &TokenizerConfig, override_path: Option<&Path>) -> Result<Self> {
        match override_path {
            Some(path) => Self::new(&read_to_string(path)?, &config.special_tokens),
            None => Self::from_named(&config.chat_templates, &config.special_tokens),
        }
    }

    /// [`ChatTemplate::from_config`] of the model directory's `tokenizer_config.json`.
    pub fn from_model_dir(dir: &Path, override_path: Option<&Path>) -> Result<Self> {
        Self::from_config(&TokenizerConfig::from_dir(dir)?, override_path)
    }

    fn from_named(
        templates: &[(String, String)],
        special_tokens: &[(String, String)],
    ) -> Result<Self> {
        let default = templates
            .iter()
            .find(|(n, _)| n == "default")
            .ok_or_else(|| {
                TextError::NoChatTemplate(
                "the model has no chat template (no chat_template in tokenizer_config.json and \
                 no chat_template.jinja); give one with --chat-template"
                    .into(),
            )
            })?;
        let mut env = environment();
        let mut has_tool_use = false;
        let mut detected = [ContentFormat::String; 2];
        for (name, source) in templates {
            if name != "default" && name != "tool_use" {
                continue;
            }
            has_tool_use |= name == "tool_use";
            let source = strip_generation_tags(source);
            let format = content_format::detect(&source);
            if name == "default" {
                detected = [format; 2];
            }
            env.add_template_owned(name.clone(), source).map_err(|e| {
                TextError::Template(format!("chat template {name:?}: {}", describe(&e)))
            })?;
        }
        if let Some((_, source)) = templates.iter().find(|(n, _)| n == "tool_use") {
            detected[1] = content_format::detect(&strip_generation_tags(source));
        }
        Ok(Self {
            content_format: None,
            inner: Arc::new(Inner {
                env,
                has_tool_use,
                mentions_content: default.1.contains("content"),
                detected,
                merges_inline_system: OnceLock::new(),
                special_tokens: special_tokens
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                    .collect(),
            }),
        })
    }

    /// Whether a system message after the first must join the leading system prompt: the
    /// template fails on `[system, user, system, user]` (vLLM's probe, e.g. a `loop.first`
    /// guard). Rendered once, on first use.
    pub fn merges_inline_system(&self) -> bool {
        *self.inner.merges_inline_system.get_or_init(|| {
            let messages = ["system", "user", "system", "user"]
                .iter()
                .map(|role| serde_json::json!({"role": role, "content": "t"}))
                .collect();
            let probe = ChatTemplateInput {
                messages,
                ..ChatTemplateInput::default()
            };
            self.render(&probe).is_err()
        })
    }

    /// This template with `--chat-template-content-format` set to `option`: message
    /// content is converted to the resolved format before rendering.
    pub fn with_content_format(mut self, option: ContentFormatOption) -> Self {
        self.content_format = Some(option);
        self
    }

    /// How message content reaches the template (`tools`: the request has tools, which
    /// renders the `tool_use` template when there is one); `auto` when no option is set.
    pub fn content_format(&self, tools: bool) -> ContentFormat {
        let detected = self.inner.detected[usize::from(tools && self.inner.has_tool_use)];
        self.option().resolve(detected).0
    }

    fn option(&self) -> ContentFormatOption {
        self.content_format.unwrap_or_default()
    }

    /// The start-up log line of the content format (and the tool_use template's).
    pub fn content_format_line(&self) -> String {
        let (format, why) = self.option().resolve(self.inner.detected[0]);
        let mut line = format!("chat template content format: {} ({why})", format.name());
        if self.inner.has_tool_use && self.inner.detected[1] != self.inner.detected[0] {
            let (tools, why) = self.option().resolve(self.inner.detected[1]);
            if tools != format {
                line.push_str(&format!(
                    "; with tools (tool_use template): {} ({why})",
                    tools.name()
                ));
            }
        }
        line
    }

    /// Renders the prompt text, like transformers' `apply_chat_template(tokenize=False)`:
    /// content is given in the template's content format ([`content_format`]) when one
    /// is set ([`ChatTemplate::with_content_format`]), other message keys whose value is
    /// null are dropped, reasoning fields are aliased
    /// (`reasoning_content` / `thinking` / `reasoning`), and `continue_final_message` cuts
    /// the text after the final message's content.
    pub fn render(&self, input: &ChatTemplateInput) -> Result<String> {
        if input.continue_final_message && input.add_generation_prompt {
            return Err(TextError::InvalidInput(
                "continue_final_message and add_generation_prompt are not compatible".into(),
            ));
        }
        let (messages, final_text) = self.convert_messages(input)?;
        let optional_list = |list: &Option<Vec<Json>>| match list {
            Some(items) => Value::from(items.iter().map(to_value).collect::<Vec<_>>()),
            None => Value::from(()),
        };
        let mut vars: Vec<(Value, Value)> = vec![
            (Value::from("messages"), messages),
            (Value::from("tools"), optional_list(&input.tools)),
            (Value::from("documents"), optional_list(&input.documents)),
            (
                Value::from("add_generation_prompt"),
                Value::from(input.add_generation_prompt),
            ),
        ];
        for (name, token) in &self.inner.special_tokens {
            if !input.kwargs.contains_key(name) {
                vars.push((Value::from(name.as_str()), token.clone()));
            }
        }
        for (name, value) in &input.kwargs {
            if RESERVED.contains(&name.as_str()) {
                return Err(TextError::InvalidInput(format!(
                    "chat_template_kwargs may not set {name:?}"
                )));
            }
            vars.push((Value::from(name.as_str()), to_value(value)));
        }
        let name = if input.tools.is_some() && self.inner.has_tool_use {
            "tool_use"
        } else {
            "default"
        };
        let rendered = self
            .inner
            .env
            .get_template(name)
            .and_then(|t| t.render(Value::from_iter(vars)))
            .map_err(|e| TextError::Template(describe(&e)))?;
        match final_text {
            Some(text) => cut_after_final_message(rendered, &text),
            None => Ok(rendered),
        }
    }

    /// The messages as template values, plus the final message's text when continuing it.
    fn convert_messages(&self, input: &ChatTemplateInput) -> Result<(Value, Option<String>)> {
        let mut out = Vec::with_capacity(input.messages.len());
        let mut final_text = None;
        let format = self
            .content_format
            .map(|_| self.content_format(input.tools.is_some()));
        for (i, message) in input.messages.iter().enumerate() {
            let Json::Object(fields) = message else {
                return Err(TextError::InvalidInput(format!(
                    "messages[{i}] must be an object"
                )));
            };
            let content = match format {
                Some(format) => content_format::convert(fields.get("content"), format),
                None => fields
                    .get("content")
                    .filter(|c| !c.is_null())
                    .map(Cow::Borrowed),
            };
            let mut entries: Vec<(String, Value)> = Vec::with_capacity(fields.len() + 2);
            let reasoning = ["reasoning_content", "thinking", "reasoning"]
                .iter()
                .find_map(|k| fields.get(*k).filter(|v| !v.is_null()));
            if let Some(r) = reasoning {
                entries.push(("thinking".into(), to_value(r)));
            }
            for (key, value) in fields {
                if key == "content" {
                    if let Some(c) = &content {
                        entries.push((key.clone(), to_value(c)));
                    }
                } else if value.is_null() {
                    continue;
                } else if reasoning.is_some() && key == "thinking" {
                    entries[0].1 = to_value(value);
                } else {
                    entries.push((key.clone(), to_value(value)));
                }
            }
            if let (Some(c), false) = (&content, fields.contains_key("content")) {
                entries.push(("content".into(), to_value(c)));
            }
            if let Some(r) = reasoning {
                match entries.iter_mut().find(|(k, _)| k == "reasoning_content") {
                    Some(entry) => entry.1 = to_value(r),
                    None => entries.push(("reasoning_content".into(), to_value(r))),
                }
            }
            if input.continue_final_message && i + 1 == input.messages.len() {
                final_text = Some(self.tag_final_message(&mut entries, content.as_deref())?);
            }
            out.push(Value::from_iter(entries));
        }
        if input.continue_final_message && final_text.is_none() {
            return Err(TextError::InvalidInput(
                "continue_final_message is set but the conversation is empty".into(),
            ));
        }
        Ok((Value::from(out), final_text))
    }

    /// Appends [`CONTINUE_TAG`] to the final message's text; returns that text.
    fn tag_final_message(
        &self,
        entries: &mut [(String, Value)],
        content: Option<&Json>,
    ) -> Result<String> {
        let invalid = |m: &str| Err(TextError::InvalidInput(m.to_owned()));
        if !self.inner.mentions_content {
            return invalid(
                "continue_final_message is set but the chat template never reads `content`",
            );
        }
        let Some(entry) = entries.iter_mut().find(|(k, _)| k == "content") else {
            return invalid("continue_final_message is set but the final message has no content");
        };
        match content {
            Some(Json::String(s)) => {
                entry.1 = Value::from(format!("{s}{CONTINUE_TAG}"));
                Ok(s.clone())
            }
            Some(Json::Array(blocks)) => {
                let Some(pos) = blocks.iter().rposition(|b| b.get("text").is_some()) else {
                    return invalid(
                        "continue_final_message is set but the final message has no text",
                    );
                };
                let Some(text) = blocks[pos].get("text").and_then(Json::as_str) else {
                    return invalid("the final message's text must be a string");
                };
                let mut blocks = blocks.clone();
                blocks[pos]["text"] = Json::String(format!("{text}{CONTINUE_TAG}"));
                entry.1 = to_value(&Json::Array(blocks));
                Ok(text.to_owned())
            }
            _ => invalid("continue_final_message needs a string or a list of text blocks"),
        }
    }
}

/// Cuts the rendered prompt right after the final message's content (transformers' rule).
fn cut_after_final_message(rendered: String, final_text: &str) -> Result<String> {
    let tag = CONTINUE_TAG.trim();
    let (Some(tag_loc), true) = (rendered.rfind(tag), rendered.contains(final_text.trim())) else {
        return Err(TextError::InvalidInput(
            "continue_final_message is set but the final message does not appear in the chat \
             after applying the chat template"
                .into(),
        ));
    };
    if rendered[tag_loc..].starts_with(CONTINUE_TAG) {
        Ok(rendered[..tag_loc].to_owned())
    } else {
        Ok(rendered[..tag_loc].trim_end().to_owned())
    }
}

/// JSON → template value, keeping object key order.
pub(crate) fn to_value(json: &Json) -> Value {
    match json {
        Json::Null => Value::from(()),
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Value::from(u),
            (_, Some(i)) => Value::from(i),
            _ => Value::from(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => Value::from(items.iter().map(to_value).collect::<Vec<_>>()),
        Json::Object(map) => Value::from_iter(map.iter().map(|(k, v)| (k.as_str(), to_value(v)))),
    }
}

#[cfg(test)]
pub(crate) mod tests;
