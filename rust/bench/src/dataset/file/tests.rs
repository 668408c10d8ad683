//! Unit tests of `file.rs`, on the word-level tokenizer of [`crate::dataset::word_model`].

use super::*;
use crate::dataset::word_model::model_dir;

fn spec(dir: &Path, name: &str, contents: &str, kind: FileKind, n: usize) -> FileSpec {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    FileSpec {
        kind,
        path,
        num_prompts: n,
        seed: 7,
    }
}

fn turns(prompt: &str, answer: &str) -> Value {
    serde_json::json!({"conversations": [{"from": "human", "value": prompt},
                                         {"from": "gpt", "value": answer}]})
}

#[test]
fn sharegpt_takes_first_turns_pruned_as_vllm_and_oversamples() {
    let dir = model_dir();
    let data = Value::Array(vec![
        serde_json::json!({"conversations": [{"from": "human", "value": "a b c d"}]}),
        turns("a b", "a b c d e"),         // prompt under 4 tokens: pruned
        turns("a b c d", "e f"),           // answer under 4 tokens: pruned
        turns("a b c d e", "f g h a b c"), // 5 in, 6 out
        turns("h g f e d c b a", "a b c d"), // 8 in, 4 out
        serde_json::json!({"id": "no turns"}),
    ]);
    let kind = FileKind::ShareGpt { output_len: None };
    let s = spec(dir.path(), "sg.json", &data.to_string(), kind, 5);
    let prompts = file_prompts(dir.path(), &s).unwrap();
    assert_eq!(prompts.len(), 5);
    let mut seen: Vec<(usize, usize)> = prompts
        .iter()
        .map(|p| (p.prompt_len, p.output_len))
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, [(5, 6), (8, 4)]);
    assert!(prompts
        .iter()
        .all(|p| p.text == "a b c d e" || p.text == "h g f e d c b a"));
    // a fixed output length keeps the short answer, and applies to every request
    let fixed = FileKind::ShareGpt {
        output_len: Some(2),
    };
    let s = spec(dir.path(), "sg.json", &data.to_string(), fixed, 3);
    let prompts = file_prompts(dir.path(), &s).unwrap();
    let mut texts: Vec<&str> = prompts.iter().map(|p| p.text.as_str()).collect();
    texts.sort_unstable();
    assert_eq!(texts, ["a b c d", "a b c d e", "h g f e d c b a"]);
    assert!(prompts.iter().all(|p| p.output_len == 2));
    // the same seed draws the same requests
    assert_eq!(prompts, file_prompts(dir.path(), &s).unwrap());
}

#[test]
fn custom_wraps_prompts_in_the_chat_template() {
    let dir = model_dir();
    let lines = "{\"prompt\": \"a b\", \"output_tokens\": 3}\n\n{\"prompt\": \"c\"}\n";
    let kind = FileKind::Custom {
        output_len: Some(5),
        chat_template: true,
    };
    let s = spec(dir.path(), "c.jsonl", lines, kind, 2);
    let mut prompts = file_prompts(dir.path(), &s).unwrap();
    prompts.sort_by(|a, b| a.text.cmp(&b.text));
    assert_eq!(prompts[0].text, "<s> user a b assistant");
    assert_eq!((prompts[0].prompt_len, prompts[0].output_len), (5, 5));
    assert_eq!(prompts[1].text, "<s> user c assistant");
    // -1: each line's own output_tokens, which every line must then have
    let own = FileKind::Custom {
        output_len: None,
        chat_template: false,
    };
    let s = spec(dir.path(), "c.jsonl", lines, own.clone(), 1);
    let err = file_prompts(dir.path(), &s).unwrap_err();
    assert!(
        err.ends_with(
            "c.jsonl line 3: no \"output_tokens\": give each line one, or \
                           --custom-output-len"
        ),
        "{err}"
    );
    let s = spec(
        dir.path(),
        "c2.jsonl",
        "{\"prompt\": \"a b\", \"output_tokens\": 3}",
        own,
        2,
    );
    let prompts = file_prompts(dir.path(), &s).unwrap();
    assert_eq!(prompts.len(), 2); // oversampled
    assert!(prompts
        .iter()
        .all(|p| p.text == "a b" && p.output_len == 3 && p.prompt_len == 2));
}

#[test]
fn unreadable_files_name_the_file_and_the_line() {
    let dir = model_dir();
    let custom = FileKind::Custom {
        output_len: Some(4),
        chat_template: false,
    };
    let s = spec(
        dir.path(),
        "bad.jsonl",
        "{\"prompt\": \"a\"}\n{oops\n",
        custom.clone(),
        1,
    );
    let err = file_prompts(dir.path(), &s).unwrap_err();
    assert!(err.contains("bad.jsonl line 2: not a JSON object"), "{err}");
    let s = spec(dir.path(), "p.jsonl", "{\"text\": \"a\"}\n", custom, 1);
    let err = file_prompts(dir.path(), &s).unwrap_err();
    assert!(
        err.contains("p.jsonl line 1: no string \"prompt\""),
        "{err}"
    );
    let sharegpt = FileKind::ShareGpt { output_len: None };
    let s = spec(
        dir.path(),
        "sg.json",
        "{\"not\": \"a list\"}",
        sharegpt.clone(),
        1,
    );
    let err = file_prompts(dir.path(), &s).unwrap_err();
    assert!(
        err.contains("sg.json: not ShareGPT JSON: expected a list"),
        "{err}"
    );
    let s = spec(dir.path(), "empty.json", "[]", sharegpt.clone(), 1);
    assert!(file_prompts(dir.path(), &s)
        .unwrap_err()
        .contains("no usable entry"));
    let missing = FileSpec {
        kind: sharegpt,
        path: dir.path().join("absent.json"),
        num_prompts: 1,
        seed: 0,
    };
    let err = file_prompts(dir.path(), &missing).unwrap_err();
    assert!(
        err.starts_with("cannot read the dataset") && err.contains("absent.json"),
        "{err}"
    );
}
