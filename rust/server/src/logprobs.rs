//! Log-probabilities in the OpenAI shapes, from the engine's `TokenLogprobs`. Mirrors
//! `server/logprobs.py`: a token's text is its id decoded alone with special
//! tokens kept; `bytes` are that text's UTF-8 bytes; log-probabilities below -9999 (or
//! not finite) are reported as -9999. Chat: `{"content": [{"token", "logprob", "bytes",
//! "top_logprobs": [...]}]}`. Completions: `{"tokens", "token_logprobs",
//! "top_logprobs" (text -> logprob, first occurrence kept), "text_offset"}` with offsets
//! in characters from the start of the choice's text.

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

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct CompletionLogprobs {
    pub tokens: Vec<String>,
    pub token_logprobs: Vec<f64>,
    pub top_logprobs: Vec<TopMap>,
    pub text_offset: Vec<usize>,
}

impl CompletionLogprobs {
    pub fn extend(&mut self, part: CompletionLogprobs) {
        self.tokens.extend(part.tokens);
        self.token_logprobs.extend(part.token_logprobs);
        self.top_logprobs.extend(part.top_logprobs);
        self.text_offset.extend(part.text_offset);
    }
}

/// Token id -> its text alone (cached; the cache is bounded by the vocabulary).
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

    fn top<'a>(
        &'a self,
        entry: &'a TokenLogprobs,
        top: usize,
    ) -> impl Iterator<Item = (Arc<str>, f64)> + 'a {
        entry
            .top_token_ids
            .iter()
            .zip(&entry.top_logprobs)
            .take(top)
            .map(|(&id, &lp)| (self.text(id), clamp(lp)))
    }

    pub fn chat(&self, entries: &[TokenLogprobs], top: usize) -> Vec<TokenLogprob> {
        entries
            .iter()
            .map(|entry| {
                let token = self.text(entry.token_id);
                TokenLogprob {
                    bytes: token.as_bytes().to_vec(),
                    token: token.to_string(),
                    logprob: clamp(entry.logprob),
                    top_logprobs: self
                        .top(entry, top)
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
    ) -> (CompletionLogprobs, usize) {
        let mut out = CompletionLogprobs::default();
        for entry in entries {
            let token = self.text(entry.token_id);
            let mut tops = TopMap::default();
            for (text, logprob) in self.top(entry, top) {
                if !tops.0.iter().any(|(t, _)| *t == text) {
                    tops.0.push((text, logprob));
                }
            }
            out.text_offset.push(offset);
            offset += token.chars().count();
            out.tokens.push(token.to_string());
            out.token_logprobs.push(clamp(entry.logprob));
            out.top_logprobs.push(tops);
        }
        (out, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
