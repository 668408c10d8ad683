//! What `GET /tokenizer_info` answers (`--enable-tokenizer-info-endpoint`, vLLM's route
//! and flag): the tokenizer's configuration, read from its files once at start-up, so that
//! both frontends answer the same JSON. Mirrors `server/text/tokenizer_info.py` (its
//! docstring gives the rules and how they follow vLLM). Behaviour: docs/api.md,
//! "/tokenizer_info".

use std::path::Path;

use serde_json::{Map, Value};

/// The `tokenizer_class` of a config that names none.
pub const DEFAULT_CLASS: &str = "PreTrainedTokenizerFast";

fn read_json(path: &Path) -> Result<Option<Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// `value` with every object that has a string `content` (an added token) as it.
fn plain(value: Value) -> Value {
    match value {
        Value::Object(map) => match map.get("content") {
            Some(Value::String(content)) => Value::String(content.clone()),
            _ => Value::Object(map.into_iter().map(|(k, v)| (k, plain(v))).collect()),
        },
        Value::Array(items) => Value::Array(items.into_iter().map(plain).collect()),
        other => other,
    }
}

/// The answer for the tokenizer in `dir` served with `chat_template` (the
/// `--chat-template` file, or `None`).
pub fn tokenizer_info(dir: &Path, chat_template: Option<&Path>) -> Result<Value, String> {
    let config_path = dir.join("tokenizer_config.json");
    let config = match read_json(&config_path)? {
        None => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(format!("{} is not a JSON object", config_path.display())),
    };
    let mut info: Map<String, Value> = config
        .into_iter()
        .filter(|(key, _)| key != "vocab_file" && key != "merges_file")
        .map(|(key, value)| (key, plain(value)))
        .collect();
    let tokenizer = read_json(&dir.join("tokenizer.json"))?;
    let mut added: Vec<(u64, String)> = tokenizer
        .as_ref()
        .and_then(|t| t.get("added_tokens"))
        .and_then(Value::as_array)
        .map(|tokens| {
            tokens
                .iter()
                .filter_map(|t| {
                    Some((
                        t.get("id")?.as_u64()?,
                        t.get("content")?.as_str()?.to_owned(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    added.sort_by_key(|(id, _)| *id);
    let decoder: Map<String, Value> = added
        .into_iter()
        .map(|(id, content)| (id.to_string(), Value::String(content)))
        .collect();
    info.insert("added_tokens_decoder".into(), Value::Object(decoder));
    if !info.get("tokenizer_class").is_some_and(Value::is_string) {
        info.insert(
            "tokenizer_class".into(),
            Value::String(DEFAULT_CLASS.into()),
        );
    }
    let jinja = dir.join("chat_template.jinja");
    let source = chat_template.unwrap_or(&jinja);
    match std::fs::read_to_string(source) {
        Ok(text) => {
            info.insert("chat_template".into(), Value::String(text));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && chat_template.is_none() => {}
        Err(e) => return Err(format!("cannot read {}: {e}", source.display())),
    }
    Ok(Value::Object(info))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_config_with_added_tokens_as_text_and_the_served_template() {
        let dir = tempfile::tempdir().unwrap();
        let config = json!({"add_bos_token": false, "vocab_file": "v.json",
                            "bos_token": {"__type": "AddedToken", "content": "<s>"},
                            "model_max_length": 8192, "merges_file": "m.txt",
                            "chat_template": "from the config"});
        std::fs::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
        let tokenizer = json!({"added_tokens": [{"id": 7, "content": "</s>"},
                                                {"id": 2, "content": "<s>"}]});
        std::fs::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
        let info = tokenizer_info(dir.path(), None).unwrap();
        assert_eq!(
            info,
            json!({"add_bos_token": false, "bos_token": "<s>", "model_max_length": 8192,
                   "chat_template": "from the config",
                   "added_tokens_decoder": {"2": "<s>", "7": "</s>"},
                   "tokenizer_class": DEFAULT_CLASS})
        );
        let keys: Vec<&String> = info.as_object().unwrap().keys().collect();
        assert_eq!(
            keys[..3],
            ["add_bos_token", "bos_token", "model_max_length"]
        );
        std::fs::write(dir.path().join("chat_template.jinja"), "from the file").unwrap();
        let info = tokenizer_info(dir.path(), None).unwrap();
        assert_eq!(info["chat_template"], "from the file");
        let own = dir.path().join("own.jinja");
        std::fs::write(&own, "given").unwrap();
        assert_eq!(
            tokenizer_info(dir.path(), Some(&own)).unwrap()["chat_template"],
            "given"
        );
        let missing = dir.path().join("missing.jinja");
        assert!(tokenizer_info(dir.path(), Some(&missing)).is_err());
    }

    #[test]
    fn no_config_is_an_empty_one_and_a_bad_one_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let info = tokenizer_info(dir.path(), None).unwrap();
        assert_eq!(
            info,
            json!({"added_tokens_decoder": {}, "tokenizer_class": DEFAULT_CLASS})
        );
        std::fs::write(dir.path().join("tokenizer_config.json"), "[1]").unwrap();
        assert!(tokenizer_info(dir.path(), None).is_err());
    }
}
