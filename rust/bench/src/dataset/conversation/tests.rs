//! The conversation file reader: both shapes, answer lengths, oversampling, and errors
//! naming the file and the line.

use super::*;

/// One token per whitespace-separated word.
struct Words;

impl TokenCodec for Words {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        Ok(text.split_whitespace().map(|_| 7).collect())
    }
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        Ok(vec!["w"; ids.len()].join(" "))
    }
    fn vocab_size(&self) -> usize {
        8
    }
    fn is_special(&self, _id: u32) -> bool {
        false
    }
}

fn write(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vrs-conv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn spec(path: PathBuf, output_len: Option<usize>, n: usize) -> ConversationSpec {
    ConversationSpec {
        path,
        output_len,
        num_conversations: n,
        seed: 0,
    }
}

#[test]
fn both_shapes_are_read_with_answer_lengths() {
    let path = write(
        "both.json",
        r#"[{"id": "a", "messages": [{"role": "system", "content": "be brief"},
             {"role": "user", "content": "one two"},
             {"role": "assistant", "content": "three four five"},
             {"role": "user", "content": "six"},
             {"role": "assistant", "content": "seven"}]},
            {"id": 7, "conversations": [{"from": "human", "value": "hi"},
             {"from": "gpt", "value": "a b c d"}]}]"#,
    );
    let codec = Words;
    let mut got = conversations(&codec, &spec(path, None, 2)).unwrap();
    got.sort_by(|x, y| x.id.cmp(&y.id));
    assert_eq!(got[0].id, "7");
    assert_eq!(got[0].system, None);
    assert_eq!(got[0].turns.len(), 1);
    assert_eq!(got[1].system.as_deref(), Some("be brief"));
    let turns: Vec<(&str, usize)> = got[1]
        .turns
        .iter()
        .map(|t| (t.user.as_str(), t.output_len))
        .collect();
    assert_eq!(turns, [("one two", 3), ("six", 1)]);
}

#[test]
fn too_few_are_drawn_again_and_a_fixed_length_applies() {
    let path = write(
        "few.json",
        r#"[{"messages": [{"role": "user", "content": "only"}]}]"#,
    );
    let codec = Words;
    let got = conversations(&codec, &spec(path.clone(), Some(9), 3)).unwrap();
    assert_eq!(got.len(), 3);
    assert!(got.iter().all(|c| c.turns[0].output_len == 9));
    let err = conversations(&codec, &spec(path, None, 1)).unwrap_err();
    assert!(err.contains("--conversation-output-len"), "{err}");
}

#[test]
fn bad_files_name_the_file_and_the_place() {
    let codec = Words;
    let cases = [
        ("syntax.json", "[\n{\"messages\": [\n}", "line 3"),
        ("object.json", "{}", "expected a JSON list"),
        (
            "keys.json",
            r#"[{"id": "x"}]"#,
            "conversation 0 (id x) has neither",
        ),
        (
            "role.json",
            r#"[{"messages": [{"role": "robot", "content": "a"}]}]"#,
            "unknown role \"robot\"",
        ),
        (
            "order.json",
            r#"[{"messages": [{"role": "assistant", "content": "a"}]}]"#,
            "message 0: expected a user message",
        ),
        (
            "twice.json",
            r#"[{"messages": [{"role": "user", "content": "a"},
                              {"role": "user", "content": "b"}]}]"#,
            "line 2: conversation 0 (id 0) message 1: expected the assistant's answer",
        ),
        (
            "list.json",
            "[{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}]},\n {\"messages\": 5}]",
            "line 2: conversation 1: expected an object with a \"messages\" list",
        ),
        (
            "content.json",
            r#"[{"messages": [{"role": "user"}]}]"#,
            "message 0 has no string \"content\"",
        ),
        ("empty.json", "[]", "empty"),
    ];
    for (name, text, wanted) in cases {
        let path = write(name, text);
        let err = conversations(&codec, &spec(path, Some(4), 1)).unwrap_err();
        assert!(err.contains(name), "{err}");
        assert!(err.contains(wanted), "{name}: {err}");
    }
    let missing = spec(PathBuf::from("/nonexistent/conv.json"), Some(4), 1);
    let err = conversations(&codec, &missing).unwrap_err();
    assert!(err.contains("/nonexistent/conv.json"), "{err}");
}
