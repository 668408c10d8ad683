//! The conversation dataset (`--dataset-name conversation`): multi-turn chats read from a
//! JSON list, in either shape vLLM's multi-turn benchmark (`benchmarks/multi_turn`) works
//! with:
//!
//! * `{"id": ..., "messages": [{"role": "user" | "assistant" | "system", "content": TEXT}]}`
//!   (what its `convert_sharegpt_to_openai.py` writes);
//! * `{"id": ..., "conversations": [{"from": "human" | "gpt" | "system" | ..., "value":
//!   TEXT}]}` (ShareGPT's).
//!
//! An optional system message comes first, then user and assistant messages alternate,
//! starting with the user. Each user message is a turn the client sends; the file's answer
//! to it is not sent (the server's own answer goes into the history), only its length in
//! tokens is the turn's `max_tokens` (or `--conversation-output-len`). The conversations are
//! shuffled with the seed; fewer than `--num-prompts` are drawn again at random. A file
//! that cannot be read is an error naming the file, and the line (JSON syntax) or the
//! entry and message at fault.

use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use super::TokenCodec;

/// One user turn: what is sent, and how many tokens are asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    pub user: String,
    /// Tokens of `user` (no template): the prompt length counted when the server reports
    /// no usage.
    pub user_len: usize,
    pub output_len: usize,
}

/// One conversation of the dataset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conversation {
    /// The entry's `id`, else its index in the file.
    pub id: String,
    /// The system message the history starts with, if any.
    pub system: Option<String>,
    pub turns: Vec<Turn>,
}

/// The conversations to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationSpec {
    pub path: PathBuf,
    /// max_tokens of every turn; `None`: the length of the file's answer to it.
    pub output_len: Option<usize>,
    /// Conversations to run (`--num-prompts`).
    pub num_conversations: usize,
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    System,
    User,
    Assistant,
}

/// ShareGPT's `from` names and OpenAI's roles.
fn role(name: &str) -> Option<Role> {
    match name {
        "system" => Some(Role::System),
        "user" | "human" => Some(Role::User),
        "assistant" | "gpt" | "chatgpt" | "bing" | "bard" | "model" => Some(Role::Assistant),
        _ => None,
    }
}

/// The (role, text) messages of one entry.
fn messages(entry: &Value, at: &dyn Fn(String) -> String) -> Result<Vec<(Role, String)>, String> {
    let (list, role_key, text_key) = match (entry.get("messages"), entry.get("conversations")) {
        (Some(list), _) => (list, "role", "content"),
        (None, Some(list)) => (list, "from", "value"),
        (None, None) => {
            return Err(at(
                "has neither \"messages\" (role/content) nor \"conversations\" (from/value)".into(),
            ))
        }
    };
    let list = list
        .as_array()
        .ok_or_else(|| at("its messages are not a list".into()))?;
    list.iter()
        .enumerate()
        .map(|(k, message)| {
            let name = message
                .get(role_key)
                .and_then(Value::as_str)
                .ok_or_else(|| at(format!("message {k} has no string \"{role_key}\"")))?;
            let role = role(name).ok_or_else(|| {
                at(format!(
                    "message {k}: unknown {role_key} {name:?} (user, assistant or system; \
                     ShareGPT's human, gpt)"
                ))
            })?;
            let text = message
                .get(text_key)
                .and_then(Value::as_str)
                .ok_or_else(|| at(format!("message {k} has no string \"{text_key}\"")))?;
            Ok((role, text.to_string()))
        })
        .collect()
}

/// A conversation as read, and the file's answer to each of its turns (if any).
type Parsed = (Conversation, Vec<Option<String>>);

/// Every conversation of the file, in file order (nothing tokenized yet: output lengths
/// are the answers' texts).
fn parse(path: &Path, text: &str) -> Result<Vec<Parsed>, String> {
    let file = path.display();
    let data: Value = serde_json::from_str(text).map_err(|e| {
        format!(
            "{file} line {}: not a JSON list of conversations: {e}",
            e.line()
        )
    })?;
    let entries = data.as_array().ok_or_else(|| {
        format!("{file}: expected a JSON list of conversations, each with \"messages\"")
    })?;
    let mut out = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let id = match entry.get("id") {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => i.to_string(),
        };
        let at = |what: String| format!("{file}: conversation {i} (id {id}) {what}");
        let mut list = messages(entry, &at)?.into_iter().peekable();
        let system = match list.peek() {
            Some((Role::System, _)) => list.next().map(|(_, text)| text),
            _ => None,
        };
        let mut turns = Vec::new();
        let mut answers = Vec::new();
        let mut index = usize::from(system.is_some());
        while let Some((role, text)) = list.next() {
            if role != Role::User {
                return Err(at(format!(
                    "message {index}: expected a user message (after an optional system \
                     message, user and assistant messages alternate)"
                )));
            }
            let answer = match list.peek() {
                Some((Role::Assistant, _)) => list.next().map(|(_, text)| text),
                Some(_) => {
                    return Err(at(format!(
                        "message {}: expected the assistant's answer to message {index}",
                        index + 1
                    )))
                }
                None => None,
            };
            index += 1 + usize::from(answer.is_some());
            turns.push(Turn {
                user: text,
                user_len: 0,
                output_len: 0,
            });
            answers.push(answer);
        }
        if turns.is_empty() {
            return Err(at("has no user message".into()));
        }
        out.push((Conversation { id, system, turns }, answers));
    }
    if out.is_empty() {
        return Err(format!("{file}: the list of conversations is empty"));
    }
    Ok(out)
}

/// `spec.num_conversations` conversations of the file, each turn's `max_tokens` set.
pub fn conversations(
    codec: &impl TokenCodec,
    spec: &ConversationSpec,
) -> Result<Vec<Conversation>, String> {
    let text = std::fs::read_to_string(&spec.path)
        .map_err(|e| format!("cannot read the dataset {}: {e}", spec.path.display()))?;
    let mut found = Vec::new();
    for (mut conversation, answers) in parse(&spec.path, &text)? {
        for (k, (turn, answer)) in conversation.turns.iter_mut().zip(answers).enumerate() {
            turn.user_len = codec.encode(&turn.user)?.len();
            turn.output_len = match (spec.output_len, answer) {
                (Some(n), _) => n,
                (None, Some(answer)) => codec.encode(&answer)?.len().max(1),
                (None, None) => {
                    return Err(format!(
                        "{}: conversation {} turn {}: no assistant answer to take max_tokens \
                         from; pass --conversation-output-len N",
                        spec.path.display(),
                        conversation.id,
                        k + 1
                    ))
                }
            };
        }
        found.push(conversation);
    }
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    found.shuffle(&mut rng);
    found.truncate(spec.num_conversations);
    let have = found.len();
    while found.len() < spec.num_conversations {
        let again = found[rng.random_range(0..have)].clone();
        found.push(again);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
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
                "message 1: expected the assistant's answer",
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
}
