//! Decoding for tokenizers whose decoder is `ByteLevel`: every id's bytes are computed once
//! at load time, so `decode` is a concatenation instead of HF's per-id `String` lookups
//! and per-character table walks.
//!
//! Same rules as `tokenizers`' `decode` with a `ByteLevel` decoder: an added token's
//! content wins over the model's token for its id; special tokens (by content) are dropped
//! when asked; a token whose characters are all in the byte alphabet stands for those bytes,
//! any other for its UTF-8; unknown ids are skipped; invalid UTF-8 becomes U+FFFD.

use ahash::{AHashMap, AHashSet};
use serde_json::Value;
use tokenizers::Model;

use crate::fast::bpe::{alphabet_bytes, token_bytes};

/// The bytes of every id, in one buffer.
pub(crate) struct ByteDecoder {
    bytes: Vec<u8>,
    /// Per id: `(start, end)` in `bytes`, or `None` for an id nobody knows.
    spans: Vec<Option<(u32, u32)>>,
    special: Vec<bool>,
}

impl ByteDecoder {
    /// `None` unless `json`'s decoder is a plain `ByteLevel`; `added` is the tokenizer's
    /// added tokens (id → token).
    pub(crate) fn new(
        json: &Value,
        tokenizer: &tokenizers::Tokenizer,
        added: &AHashMap<u32, tokenizers::AddedToken>,
    ) -> Option<Self> {
        if json["decoder"]["type"] != "ByteLevel" {
            return None;
        }
        let inverse = alphabet_bytes();
        let special: AHashSet<&str> = added
            .values()
            .filter(|t| t.special)
            .map(|t| t.content.as_str())
            .collect();
        let model_ids = json["model"]["vocab"]
            .as_object()
            .into_iter()
            .flat_map(|vocab| vocab.values().filter_map(Value::as_u64));
        let size = model_ids
            .chain(added.keys().map(|&id| u64::from(id)))
            .max()
            .map_or(0, |m| m as usize + 1);
        let mut decoder = Self {
            bytes: Vec::new(),
            spans: vec![None; size],
            special: vec![false; size],
        };
        for id in 0..size as u32 {
            let token = match added.get(&id) {
                Some(t) => Some(t.content.clone()),
                None => tokenizer.get_model().id_to_token(id),
            };
            let Some(token) = token else { continue };
            let start = decoder.bytes.len() as u32;
            match token_bytes(&token, &inverse) {
                Some(raw) => decoder.bytes.extend_from_slice(&raw),
                None => decoder.bytes.extend_from_slice(token.as_bytes()),
            }
            decoder.spans[id as usize] = Some((start, decoder.bytes.len() as u32));
            decoder.special[id as usize] = special.contains(token.as_str());
        }
        Some(decoder)
    }

    pub(crate) fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> String {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            let id = id as usize;
            if let Some(Some((start, end))) = self.spans.get(id) {
                if !(skip_special_tokens && self.special[id]) {
                    out.extend_from_slice(&self.bytes[*start as usize..*end as usize]);
                }
            }
        }
        match String::from_utf8(out) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tokenizer::tests::deepseek_dir;

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn decodes_like_tokenizers() {
        let path = deepseek_dir().join("tokenizer.json");
        let hf = tokenizers::Tokenizer::from_file(&path).unwrap();
        let json = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let fast = super::ByteDecoder::new(&json, &hf, &hf.get_added_tokens_decoder()).unwrap();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for round in 0..2000 {
            let len = 1 + round % 24;
            let ids: Vec<u32> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    match state % 50 {
                        // Control and added tokens, and ids no one knows.
                        0 => (state >> 8) as u32 % 3,
                        1 => 128_000 + (state >> 8) as u32 % 1_300,
                        2 => u32::MAX - (state >> 8) as u32 % 2,
                        _ => (state >> 8) as u32 % 128_000,
                    }
                })
                .collect();
            for skip in [false, true] {
                assert_eq!(
                    fast.decode(&ids, skip),
                    hf.decode(&ids, skip).unwrap(),
                    "{ids:?} {skip}"
                );
            }
        }
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn other_decoders_are_left_to_tokenizers() {
        let path = deepseek_dir().join("tokenizer.json");
        let hf = tokenizers::Tokenizer::from_file(&path).unwrap();
        let mut json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        json["decoder"] = serde_json::json!({"type": "Fuse"});
        assert!(super::ByteDecoder::new(&json, &hf, &hf.get_added_tokens_decoder()).is_none());
    }
}
