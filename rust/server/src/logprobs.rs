//! Log-probabilities in the OpenAI shapes, from the engine's `TokenLogprobs`: chat's and
//! completions' `logprobs`, an echoed prompt's logprobs ([`TokenTexts::echo`]) and vLLM's
//! `prompt_logprobs` ([`TokenTexts::prompt`]; the engine's entry i describes prompt token
//! i+1). Mirrors `server/logprobs.py`. Behaviour: docs/api.md, "Responses", "Prompt logprobs
//! and echo".

use std::sync::Arc;

use dashmap::DashMap;
use serde::ser::{Serialize, SerializeMap, Serializer};
use vrs_text::Tokenizer;
use vrs_wire::TokenLogprobs;

pub const FLOOR: f64 = -9999.0;
/// The engine's limit (engine/runtime/sampler.py).
pub const MAX_LOGPROBS: i64 = 20;

pub fn clamp(value: f64) -> f64 {
    if value.is_finite() && value > FLOOR {
        value
    } else {
        FLOOR
    }
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TopLogprob {
    pub token: String,
    pub logprob: f64,
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TokenLogprob {
    pub token: String,
    pub logprob: f64,
    pub bytes: Vec<u8>,
    pub top_logprobs: Vec<TopLogprob>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChatLogprobs {
    pub content: Vec<TokenLogprob>,
}

/// Token text -> logprob, serialized as a JSON object in insertion order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TopMap(pub Vec<(Arc<str>, f64)>);

impl Serialize for TopMap {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (token, logprob) in &self.0 {
            map.serialize_entry(&**token, logprob)?;
        }
        map.end()
    }
}

/// `null` marks the first prompt token of an echo, which has no logprob.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CompletionLogprobs {
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<Option<f64>>,
    pub top_logprobs: Vec<Option<TopMap>>,
    pub text_offset: Vec<usize>,
}

/// One prompt token's vLLM `prompt_logprobs` entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PromptLogprob {
    pub logprob: f64,
    pub rank: u32,
    #[serde(serialize_with = "text")]
    pub decoded_token: Arc<str>,
}

fn text<S: Serializer>(value: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value)
}

/// Token id -> its entry, serialized as a JSON object keyed by the id as a string, in
/// insertion order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PromptPosition(pub Vec<(u32, PromptLogprob)>);

impl Serialize for PromptPosition {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (id, entry) in &self.0 {
            map.serialize_entry(&id.to_string(), entry)?;
        }
        map.end()
    }
}

/// vLLM's `prompt_logprobs`: one entry per prompt token, the first `null`.
pub type PromptLogprobs = Vec<Option<PromptPosition>>;

impl CompletionLogprobs {
    pub fn extend(&mut self, part: CompletionLogprobs) {
        self.tokens.extend(part.tokens);
        self.token_logprobs.extend(part.token_logprobs);
        self.top_logprobs.extend(part.top_logprobs);
        self.text_offset.extend(part.text_offset);
    }
}

/// A token as `return_tokens_as_token_ids` names it (vLLM's placeholder).
pub fn token_id_name(id: u32) -> Arc<str> {
    format!("token_id:{id}").into()
}

/// Token id -> its text alone (cached; the cache is bounded by the vocabulary). `as_ids`
/// (`return_tokens_as_token_ids`): logprobs name each token `token_id:N` instead (its
/// texts, top keys and offsets); a chat token's own `bytes` stay its text's, as vLLM's.
pub struct TokenTexts {
    tokenizer: Tokenizer,
    cache: DashMap<u32, Arc<str>>,
}

impl TokenTexts {
    pub fn new(tokenizer: Tokenizer) -> Self {
        Self {
            tokenizer,
            cache: DashMap::new(),
        }
    }

    pub fn text(&self, id: u32) -> Arc<str> {
        if let Some(text) = self.cache.get(&id) {
            return Arc::clone(&text);
        }
        let text: Arc<str> = self
            .tokenizer
            .decode(&[id], false)
            .unwrap_or_default()
            .into();
        self.cache.insert(id, Arc::clone(&text));
        text
    }

    /// Token `id`'s name in logprobs: its text, or with `as_ids` its placeholder.
    pub fn name(&self, id: u32, as_ids: bool) -> Arc<str> {
        if as_ids {
            token_id_name(id)
        } else {
            self.text(id)
        }
    }

    fn top<'a>(
        &'a self,
        entry: &'a TokenLogprobs,
        top: usize,
        as_ids: bool,
    ) -> impl Iterator<Item = (Arc<str>, f64)> + 'a {
        entry
            .top_token_ids
            .iter()
            .zip(&entry.top_logprobs)
            .take(top)
            .map(move |(&id, &lp)| (self.name(id, as_ids), clamp(lp)))
    }

    pub fn chat(&self, entries: &[TokenLogprobs], top: usize, as_ids: bool) -> Vec<TokenLogprob> {
        entries
            .iter()
            .map(|entry| {
                let token = self.name(entry.token_id, as_ids);
                TokenLogprob {
                    bytes: self.text(entry.token_id).as_bytes().to_vec(),
                    token: token.to_string(),
                    logprob: clamp(entry.logprob),
                    top_logprobs: self
                        .top(entry, top, as_ids)
                        .map(|(token, logprob)| TopLogprob {
                            bytes: token.as_bytes().to_vec(),
                            token: token.to_string(),
                            logprob,
                        })
                        .collect(),
                }
            })
            .collect()
    }

    /// The logprobs of `entries` whose text starts at `offset` (characters); and the
    /// offset after them.
    pub fn completion(
        &self,
        entries: &[TokenLogprobs],
        top: usize,
        mut offset: usize,
        as_ids: bool,
    ) -> (CompletionLogprobs, usize) {
        let mut out = CompletionLogprobs::default();
        for entry in entries {
            let token = self.name(entry.token_id, as_ids);
            let mut tops = TopMap::default();
            for (text, logprob) in self.top(entry, top, as_ids) {
                if !tops.0.iter().any(|(t, _)| *t == text) {
                    tops.0.push((text, logprob));
                }
            }
            out.text_offset.push(offset);
            offset += token.chars().count();
            out.tokens.push(token.to_string());
            out.token_logprobs.push(Some(clamp(entry.logprob)));
            out.top_logprobs.push(Some(tops));
        }
        (out, offset)
    }

    /// The echoed prompt's part of a completion's logprobs: every prompt token (`ids`),
    /// the first with `null` logprob and top, the others from `entries` (the engine's
    /// prompt logprobs) with the actual token then the top `top` in `top_logprobs`.
    /// Offsets start at 0; returns the offset after the prompt.
    pub fn echo(
        &self,
        ids: &[u32],
        entries: &[TokenLogprobs],
        top: usize,
        as_ids: bool,
    ) -> (CompletionLogprobs, usize) {
        let mut out = CompletionLogprobs::default();
        let mut offset = 0;
        for (i, &id) in ids.iter().enumerate() {
            let token = self.name(id, as_ids);
            let entry = i.checked_sub(1).and_then(|j| entries.get(j));
            out.text_offset.push(offset);
            offset += token.chars().count();
            out.tokens.push(token.to_string());
            out.token_logprobs.push(entry.map(|e| clamp(e.logprob)));
            out.top_logprobs.push(entry.map(|e| {
                let mut tops = TopMap(vec![(Arc::clone(&token), clamp(e.logprob))]);
                for (text, logprob) in self.top(e, top, as_ids) {
                    if !tops.0.iter().any(|(t, _)| *t == text) {
                        tops.0.push((text, logprob));
                    }
                }
                tops
            }));
        }
        (out, offset)
    }

    /// vLLM's `prompt_logprobs` of a prompt of `prompt_len` tokens from the engine's
    /// `entries`: `null` first, then the actual token and the top `top` (without it).
    pub fn prompt(
        &self,
        prompt_len: usize,
        entries: &[TokenLogprobs],
        top: usize,
    ) -> PromptLogprobs {
        let mut out: PromptLogprobs = Vec::with_capacity(prompt_len);
        if prompt_len > 0 {
            out.push(None);
        }
        for entry in entries.iter().take(prompt_len.saturating_sub(1)) {
            let mut position = PromptPosition(vec![(
                entry.token_id,
                PromptLogprob {
                    logprob: clamp(entry.logprob),
                    rank: entry.rank,
                    decoded_token: self.text(entry.token_id),
                },
            )]);
            let tops = entry.top_token_ids.iter().zip(&entry.top_logprobs);
            for (rank, (&id, &logprob)) in (1..).zip(tops).take(top) {
                if id != entry.token_id {
                    position.0.push((
                        id,
                        PromptLogprob {
                            logprob: clamp(logprob),
                            rank,
                            decoded_token: self.text(id),
                        },
                    ));
                }
            }
            out.push(Some(position));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts() -> TokenTexts {
        let dir = crate::testutil::tiny_model_dir();
        TokenTexts::new(crate::text::load_text(dir.path(), None).unwrap().0)
    }

    fn entry(token_id: u32, logprob: f64, rank: u32, top: &[(u32, f64)]) -> TokenLogprobs {
        TokenLogprobs {
            token_id,
            logprob,
            rank,
            top_token_ids: top.iter().map(|t| t.0).collect(),
            top_logprobs: top.iter().map(|t| t.1).collect(),
        }
    }

    #[test]
    fn prompt_logprobs_put_the_actual_token_first_once() {
        let texts = texts();
        // "hello world foo": world is the top token at its position, foo second.
        let entries = [
            entry(4, -0.1, 1, &[(4, -0.1), (5, -2.0)]),
            entry(5, f64::NEG_INFINITY, 2, &[(6, -0.3), (5, -1e5), (7, -9.0)]),
        ];
        let out = texts.prompt(3, &entries, 2);
        let json = serde_json::to_string(&out).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"[null,{"4":{"logprob":-0.1,"rank":1,"decoded_token":"world"},"#,
                r#""5":{"logprob":-2.0,"rank":2,"decoded_token":"foo"}},"#,
                r#"{"5":{"logprob":-9999.0,"rank":2,"decoded_token":"foo"},"#,
                r#""6":{"logprob":-0.3,"rank":1,"decoded_token":"bar"}}]"#
            )
        );
        assert_eq!(texts.prompt(1, &[], 3), vec![None]);
        assert!(texts.prompt(0, &[], 3).is_empty());
    }

    #[test]
    fn echo_logprobs_start_with_null_and_count_offsets() {
        let texts = texts();
        let entries = [entry(4, -0.1, 1, &[(4, -0.1), (5, -2.0)])];
        let (out, offset) = texts.echo(&[3, 4], &entries, 2, false);
        assert_eq!(offset, 10);
        assert_eq!(
            serde_json::to_value(&out).unwrap(),
            serde_json::json!({"tokens": ["hello", "world"], "token_logprobs": [null, -0.1],
                               "top_logprobs": [null, {"world": -0.1, "foo": -2.0}],
                               "text_offset": [0, 5]})
        );
        // Generated tokens continue the offsets.
        let (more, end) = texts.completion(&entries, 0, offset, false);
        assert_eq!((more.text_offset, end), (vec![10], 15));
    }

    #[test]
    fn clamps_and_orders() {
        assert_eq!(clamp(f64::NEG_INFINITY), FLOOR);
        assert_eq!(clamp(f64::NAN), FLOOR);
        assert_eq!(clamp(-1e6), FLOOR);
        assert_eq!(clamp(-0.5), -0.5);
        let map = TopMap(vec![("b".into(), -0.1), ("a".into(), -0.2)]);
        assert_eq!(
            serde_json::to_string(&map).unwrap(),
            r#"{"b":-0.1,"a":-0.2}"#
        );
    }
}
