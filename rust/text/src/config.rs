//! `tokenizer_config.json` and the chat template files of a model directory.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{Result, TextError};

/// Named special-token attributes, in the order transformers lists them.
const SPECIAL_TOKEN_ATTRIBUTES: [&str; 7] = [
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
];

/// What vrs reads from a model directory's `tokenizer_config.json` (all optional).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenizerConfig {
    /// Named special tokens (`bos_token`, `eos_token`, ..., then model-specific `*_token`
    /// keys), as transformers' `special_tokens_map`: name → token text.
    pub special_tokens: Vec<(String, String)>,
    /// Additional special tokens (`extra_special_tokens` / `additional_special_tokens`).
    pub extra_special_tokens: Vec<String>,
    /// `add_bos_token` as written. Informational: like transformers 5 with a
    /// `tokenizer.json`, vrs leaves adding BOS to the tokenizer's post-processor.
    pub add_bos_token: Option<bool>,
    /// `add_eos_token` as written (informational, as `add_bos_token`).
    pub add_eos_token: Option<bool>,
    /// `clean_up_tokenization_spaces` as written.
    pub clean_up_tokenization_spaces: Option<bool>,
    /// Chat templates by name; a single string template is named `default`.
    pub chat_templates: Vec<(String, String)>,
    /// `truncation_side` as written (transformers' default is `right`): where vLLM's
    /// `truncate_prompt_tokens` cuts when a request names no side.
    pub truncation_side: Option<String>,
}

impl TokenizerConfig {
    /// Reads `dir/tokenizer_config.json` (a missing file gives the default config), then
    /// lets `dir/chat_template.jinja` replace the `default` template, as transformers does.
    pub fn from_dir(dir: &Path) -> Result<Self> {
        let path = dir.join("tokenizer_config.json");
        let mut config = if path.exists() {
            let text = read_to_string(&path)?;
            let json: Value =
                serde_json::from_str(&text).map_err(|source| TextError::Json { path, source })?;
            Self::from_json(&json)?
        } else {
            Self::default()
        };
        let jinja = dir.join("chat_template.jinja");
        if jinja.exists() {
            let text = read_to_string(&jinja)?;
            config.set_chat_template("default", text);
        }
        Ok(config)
    }

    /// Parses the JSON object of a `tokenizer_config.json`.
    pub fn from_json(json: &Value) -> Result<Self> {
        let obj = json
            .as_object()
            .ok_or_else(|| TextError::Config("tokenizer_config.json is not an object".into()))?;
        let mut config = Self::default();
        for name in SPECIAL_TOKEN_ATTRIBUTES {
            if let Some(token) = obj.get(name).and_then(token_content) {
                config.special_tokens.push((name.to_owned(), token));
            }
        }
        for (name, value) in obj {
            if name.ends_with("_token") && !SPECIAL_TOKEN_ATTRIBUTES.contains(&name.as_str()) {
                if let Some(token) = token_content(value) {
                    config.special_tokens.push((name.clone(), token));
                }
            }
        }
        let extra = obj
            .get("extra_special_tokens")
            .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
            .or_else(|| obj.get("additional_special_tokens"));
        if let Some(Value::Array(tokens)) = extra {
            config.extra_special_tokens = tokens.iter().filter_map(token_content).collect();
        }
        config.add_bos_token = obj.get("add_bos_token").and_then(Value::as_bool);
        config.add_eos_token = obj.get("add_eos_token").and_then(Value::as_bool);
        config.clean_up_tokenization_spaces = obj
            .get("clean_up_tokenization_spaces")
            .and_then(Value::as_bool);
        config.truncation_side = obj
            .get("truncation_side")
            .and_then(Value::as_str)
            .map(str::to_owned);
        match obj.get("chat_template") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => config.set_chat_template("default", s.clone()),
            Some(Value::Array(list)) => {
                for entry in list {
                    let name = entry.get("name").and_then(Value::as_str);
                    let template = entry.get("template").and_then(Value::as_str);
                    match (name, template) {
                        (Some(n), Some(t)) => config.set_chat_template(n, t.to_owned()),
                        _ => {
                            return Err(TextError::Config(
                                "chat_template list entries need string `name` and `template`"
                                    .into(),
                            ))
                        }
                    }
                }
            }
            Some(_) => {
                return Err(TextError::Config(
                    "chat_template must be a string or a list of {name, template}".into(),
                ))
            }
        }
        Ok(config)
    }

    /// The special token text of `name` (`"bos_token"`, `"eos_token"`, ...).
    pub fn special_token(&self, name: &str) -> Option<&str> {
        self.special_tokens
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }

    /// The chat template called `name`.
    pub fn chat_template(&self, name: &str) -> Option<&str> {
        self.chat_templates
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.as_str())
    }

    fn set_chat_template(&mut self, name: &str, template: String) {
        match self.chat_templates.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = template,
            None => self.chat_templates.push((name.to_owned(), template)),
        }
    }
}

/// A token given as a string or as an `AddedToken` object (`{"content": ...}`).
fn token_content(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => o.get("content").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// Reads a UTF-8 file, naming the path in the error.
pub(crate) fn read_to_string(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| TextError::Io {
        path: PathBuf::from(path),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_tokens_and_templates() {
        let c = TokenizerConfig::from_json(&json!({
            "bos_token": {"__type": "AddedToken", "content": "<s>"},
            "eos_token": "</s>",
            "unk_token": null,
            "image_token": "<img>",
            "add_bos_token": true,
            "truncation_side": "left",
            "additional_special_tokens": ["<a>", {"content": "<b>"}],
            "chat_template": [
                {"name": "default", "template": "D"},
                {"name": "tool_use", "template": "T"}
            ]
        }))
        .unwrap();
        assert_eq!(c.special_token("bos_token"), Some("<s>"));
        assert_eq!(c.special_token("eos_token"), Some("</s>"));
        assert_eq!(c.special_token("unk_token"), None);
        assert_eq!(
            c.special_tokens.last().unwrap(),
            &("image_token".into(), "<img>".into())
        );
        assert_eq!(c.extra_special_tokens, vec!["<a>", "<b>"]);
        assert_eq!(c.add_bos_token, Some(true));
        assert_eq!(c.truncation_side.as_deref(), Some("left"));
        assert_eq!(c.chat_template("default"), Some("D"));
        assert_eq!(c.chat_template("tool_use"), Some("T"));
    }

    #[test]
    fn string_template_is_default_and_bad_shapes_fail() {
        let c = TokenizerConfig::from_json(&json!({"chat_template": "X"})).unwrap();
        assert_eq!(
            c.chat_templates,
            vec![("default".to_owned(), "X".to_owned())]
        );
        assert_eq!(c.truncation_side, None, "transformers' default: right");
        assert!(TokenizerConfig::from_json(&json!({"chat_template": 3})).is_err());
        assert!(TokenizerConfig::from_json(&json!({"chat_template": [{"name": "a"}]})).is_err());
        assert!(TokenizerConfig::from_json(&json!([])).is_err());
    }

    #[test]
    fn jinja_file_replaces_default() {
        let dir = std::env::temp_dir().join(format!("vrs-text-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("tokenizer_config.json"),
            r#"{"chat_template": "old"}"#,
        )
        .unwrap();
        std::fs::write(dir.join("chat_template.jinja"), "new").unwrap();
        let c = TokenizerConfig::from_dir(&dir).unwrap();
        assert_eq!(c.chat_template("default"), Some("new"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
