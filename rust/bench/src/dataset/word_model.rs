//! A word-level tokenizer written to a temporary directory for the file datasets' unit
//! tests: one token per word (the Whitespace pre-tokenizer), `<s>` a special token, other
//! words `<unk>`; a one-line chat template.

use serde_json::Value;

/// The vocabulary, ids in order.
pub const WORDS: &[&str] = &[
    "<s>",
    "</s>",
    "<unk>",
    "user",
    "assistant",
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
];
/// A one-line chat template: `<s> user CONTENT assistant`.
pub const TEMPLATE: &str = "{% for m in messages %}<s> user {{ m.content }}{% endfor %}\
                        {% if add_generation_prompt %} assistant{% endif %}";

/// The model directory, with [`TEMPLATE`].
pub fn model_dir() -> tempfile::TempDir {
    model_dir_with(Some(TEMPLATE))
}

/// The model directory, with this chat template (none: the model has no template).
pub fn model_dir_with(template: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let vocab: serde_json::Map<String, Value> = WORDS
        .iter()
        .enumerate()
        .map(|(i, w)| ((*w).to_owned(), Value::from(i)))
        .collect();
    let tokenizer = serde_json::json!({
        "version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [{"id": 0, "content": "<s>", "single_word": false, "lstrip": false,
                          "rstrip": false, "normalized": false, "special": true}],
        "normalizer": null, "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null,
        "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<unk>"}
    });
    std::fs::write(dir.path().join("tokenizer.json"), tokenizer.to_string()).unwrap();
    let mut config = serde_json::json!({"bos_token": "<s>", "eos_token": "</s>"});
    if let Some(template) = template {
        config["chat_template"] = Value::from(template);
    }
    std::fs::write(dir.path().join("tokenizer_config.json"), config.to_string()).unwrap();
    dir
}
