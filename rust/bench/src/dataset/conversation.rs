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
//! that cannot be read is an error naming the file and the line, with the conversation and
//! message at fault.

use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use serde_json::value::RawValue;
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

/// Line (from 1) of `text` where `part`, a slice of it, starts.
fn line_of(text: &str, part: &RawValue) -> usize {
    let offset = (part.get().as_ptr() as usize)
        .saturating_sub(text.as_ptr() as usize)
        .min(text.len());
    text.as_bytes()[..offset]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

/// One entry of the list, its messages still unread (to name their lines).
#[derive(Deserialize)]
struct Entry<'a> {
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    messages: Option<Vec<&'a RawValue>>,
    #[serde(default, borrow)]
    conversations: Option<Vec<&'a RawValue>>,
}

/// One message: its role, its text and the line it starts on.
struct Message {
    role: Role,
    text: String,
    line: usize,
}

/// The messages of one entry; `at(line, what)` makes an error.
fn messages(
    text: &str,
    entry: &Entry,
    at: &dyn Fn(usize, String) -> String,
    entry_line: usize,
) -> Result<Vec<Message>, String> {
    let (list, role_key, text_key) = match (&entry.messages, &entry.conversations) {
        (Some(list), _) => (list, "role", "content"),
        (None, Some(list)) => (list, "from", "value"),
        (None, None) => {
            return Err(at(
                entry_line,
                "has neither \"messages\" (role/content) nor \"conversations\" (from/value)".into(),
            ))
        }
    };
    list.iter()
        .enumerate()
        .map(|(k, raw)| {
            let line = line_of(text, raw);
            let message: Value = serde_json::from_str(raw.get())
                .map_err(|e| at(line, format!("message {k}: {e}")))?;
            let name = message
                .get(role_key)
                .and_then(Value::as_str)
                .ok_or_else(|| at(line, format!("message {k} has no string \"{role_key}\"")))?;
            let role = role(name).ok_or_else(|| {
                at(
                    line,
                    format!(
                        "message {k}: unknown {role_key} {name:?} (user, assistant or system; \
                         ShareGPT's human, gpt)"
                    ),
                )
            })?;
            let content = message
                .get(text_key)
                .and_then(Value::as_str)
                .ok_or_else(|| at(line, format!("message {k} has no string \"{text_key}\"")))?;
            Ok(Message {
                role,
                text: content.to_string(),
                line,
            })
        })
        .collect()
}

/// A conversation as read, and the file's answer to each of its turns (if any).
type Parsed = (Conversation, Vec<Option<String>>);

/// Every conversation of the file, in file order (nothing tokenized yet: output lengths
/// are the answers' texts).
fn parse(path: &Path, text: &str) -> Result<Vec<Parsed>, String> {
    let file = path.display();
    let entries: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| {
        format!(
            "{file} line {}: expected a JSON list of conversations, each with \"messages\": \
             {e}",
            e.line()
        )
    })?;
    let mut out = Vec::with_capacity(entries.len());
    for (i, raw) in entries.iter().enumerate() {
        let entry_line = line_of(text, raw);
        let entry: Entry = serde_json::from_str(raw.get()).map_err(|e| {
            format!(
                "{file} line {}: conversation {i}: expected an object with a \"messages\" \
                 list: {e}",
                entry_line + e.line() - 1
            )
        })?;
        let id = match &entry.id {
            Some(Value::String(id)) => id.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => i.to_string(),
        };
        let at = |line: usize, what: String| {
            format!("{file} line {line}: conversation {i} (id {id}) {what}")
        };
        let mut list = messages(text, &entry, &at, entry_line)?
            .into_iter()
            .peekable();
        let system = match list.peek() {
            Some(Message {
                role: Role::System, ..
            }) => list.next().map(|m| m.text),
            _ => None,
        };
        let mut turns = Vec::new();
        let mut answers = Vec::new();
        let mut index = usize::from(system.is_some());
        while let Some(message) = list.next() {
            if message.role != Role::User {
                return Err(at(
                    message.line,
                    format!(
                        "message {index}: expected a user message (after an optional system \
                         message, user and assistant messages alternate)"
                    ),
                ));
            }
            let answer = match list.peek() {
                Some(Message {
                    role: Role::Assistant,
                    ..
                }) => list.next().map(|m| m.text),
                Some(other) => {
                    return Err(at(
                        other.line,
                        format!(
                            "message {}: expected the assistant's answer to message {index}",
                            index + 1
                        ),
                    ))
                }
                None => None,
            };
            index += 1 + usize::from(answer.is_some());
            turns.push(Turn {
                user: message.text,
                user_len: 0,
                output_len: 0,
            });
            answers.push(answer);
        }
        if turns.is_empty() {
            return Err(at(entry_line, "has no user message".into()));
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
mod tests;
