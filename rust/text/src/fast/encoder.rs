//! A fast encoder for byte-level BPE tokenizers (GPT-2, Llama 3, Qwen, DeepSeek shapes),
//! giving the same ids as the HF `tokenizers` pipeline it shadows.
//!
//! HF's `encode` builds a `NormalizedString` per split with alignment tracking, runs onig
//! regexes and allocates per word. For the shapes below this encoder does the same
//! steps on borrowed `&str` slices: added tokens (two leftmost-longest passes, as HF does),
//! the `Split` regexes on the `regex` crate, then byte-level BPE on raw bytes. An NFC
//! normalizer (Qwen's) is supported for text that is already NFC, where it changes nothing;
//! [`FastEncoder::encode`] gives `None` for other text and the caller uses HF. A tokenizer
//! of any other shape (another normalizer, truncation, padding, dropout, token flags like
//! `lstrip`, unusual regexes) gets an `Err` from [`FastEncoder::new`] and keeps HF's path.
//! [`FastEncoder::agrees_with`] checks a probe corpus against HF at load time.

use ahash::AHashMap;
use std::sync::Mutex;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex_automata::meta::Cache;
use serde::Deserialize;
use serde_json::Value;
use unicode_normalization_alignments::is_nfc;

use crate::fast::bpe::BytePairModel;
use crate::fast::pretokenizer::{Splitter, GPT2_PATTERN};

/// Texts that exercise every pre-tokenizer branch, checked against HF before use.
const PROBES: &[&str] = &[
    "Hello, world! It's a TEST: don't, WON'T, we'LL; x's 12345 numbers 3.14159",
    "  leading spaces,   runs   of spaces  \t tabs\t\t\nnew\r\nlines\n\n\n  \n trailing   ",
    "日本語のテキスト、カタカナ。中文文本，标点！한국어 텍스트 🎉🎉 👩‍👩‍👧 naïve café Ǆ ǅ",
    "a\u{3000}\u{3000}b \u{a0}\u{a0}c \u{2028}d\u{85}e \u{b}\u{c} f\u{200b}g ١٢٣٤ ⅻ ½",
    "fn main() { let x = vec![1, 2, 3]; println!(\"{x:?}\"); } // <tag attr='v'>&amp;</tag>",
    "<｜begin▁of▁sentence｜><|im_start|>user\n<think>\n</think>\n<|endoftext|></s><s>[INST]",
    "ЀЁЂ Ωμέγα עברית العربية हिन्दी ไทย \u{301}e\u{301} x\u{308}",
];

/// Why a `tokenizer.json` cannot take the fast path.
type Refusal = String;

/// The fast path for one tokenizer.
pub(crate) struct FastEncoder {
    /// Added tokens matched on the raw text (`normalized: false`), then in the pieces left
    /// over (`normalized: true`); each with the id of every pattern.
    added: [Option<(AhoCorasick, Vec<u32>)>; 2],
    splitters: Vec<Splitter>,
    /// The tokenizer normalizes to NFC: only text already in NFC is encoded here.
    nfc: bool,
    /// Regex search caches, one per splitter, a set per concurrent `encode` (the regex's
    /// own pool is fast for one thread only; this takes one lock per call, not per search).
    caches: Mutex<Vec<Vec<Cache>>>,
    model: BytePairModel,
}

impl FastEncoder {
    /// Builds the encoder from the parsed `tokenizer.json` and the tokenizer's added
    /// tokens (id → token, after any additions from `tokenizer_config.json`).
    pub(crate) fn new(
        json: &Value,
        added_tokens: &AHashMap<u32, tokenizers::AddedToken>,
    ) -> Result<Self, Refusal> {
        for key in ["truncation", "padding"] {
            if !json.get(key).map_or(true, Value::is_null) {
                return Err(format!("`{key}` is configured"));
            }
        }
        let nfc = nfc_normalizer(json.get("normalizer"))?;
        let splitters = splitters(json.get("pre_tokenizer"))?;
        let model = model(json.get("model").ok_or("no `model`")?)?;
        let mut sets: [(Vec<&str>, Vec<u32>); 2] = Default::default();
        // HF's pattern order (special tokens, then the others, each by id) decides between
        // equal contents.
        let mut ordered: Vec<(&u32, &tokenizers::AddedToken)> = added_tokens.iter().collect();
        ordered.sort_by_key(|(&id, token)| (!token.special, id));
        for (&id, token) in ordered {
            if token.single_word || token.lstrip || token.rstrip {
                return Err(format!(
                    "added token {:?} has word/strip flags",
                    token.content
                ));
            }
            if nfc && token.normalized && !is_nfc(&token.content) {
                return Err(format!("added token {:?} changes under NFC", token.content));
            }
            if !token.content.is_empty() {
                let set = &mut sets[usize::from(token.normalized)];
                set.0.push(&token.content);
                set.1.push(id);
            }
        }
        let added = sets.map(|(patterns, ids)| {
            (!patterns.is_empty()).then(|| {
                AhoCorasickBuilder::new()
                    .match_kind(MatchKind::LeftmostLongest)
                    .kind(Some(AhoCorasickKind::DFA))
                    .build(&patterns)
                    .map(|ac| (ac, ids))
                    .map_err(|e| e.to_string())
            })
        });
        let [raw, normalized] = added;
        Ok(Self {
            added: [raw.transpose()?, normalized.transpose()?],
            splitters,
            nfc,
            caches: Mutex::new(Vec::new()),
            model,
        })
    }

    /// The ids of `text` (no post-processor: the caller adds special tokens), or `None`
    /// when the tokenizer's NFC normalizer would change `text`.
    pub(crate) fn encode(&self, text: &str) -> Option<Vec<u32>> {
        if self.nfc && !text.is_ascii() && !is_nfc(text) {
            return None;
        }
        let mut ids = Vec::with_capacity(text.len() / 3 + 1);
        let mut words = Vec::new();
        let mut scratch = Vec::new();
        let taken = self.caches.lock().ok().and_then(|mut sets| sets.pop());
        let mut caches =
            taken.unwrap_or_else(|| self.splitters.iter().map(Splitter::cache).collect());
        self.encode_added(text, 0, &mut ids, &mut |segment, ids| {
            words.clear();
            words.push(segment);
            for (splitter, cache) in self.splitters.iter().zip(&mut caches) {
                std::mem::swap(&mut words, &mut scratch);
                words.clear();
                for piece in scratch.drain(..) {
                    splitter.split(piece, cache, &mut words);
                }
            }
            for word in &words {
                self.model.encode_piece(word.as_bytes(), ids);
            }
        });
        if let Ok(mut sets) = self.caches.lock() {
            sets.push(caches);
        }
        Some(ids)
    }

    /// Splits on the added tokens of pass `pass` and later passes; text between them goes to
    /// `segment`.
    fn encode_added<'t>(
        &self,
        text: &'t str,
        pass: usize,
        ids: &mut Vec<u32>,
        segment: &mut dyn FnMut(&'t str, &mut Vec<u32>),
    ) {
        if text.is_empty() {
            return;
        }
        let Some(set) = self.added.get(pass) else {
            segment(text, ids);
            return;
        };
        let Some((trie, token_ids)) = set else {
            self.encode_added(text, pass + 1, ids, segment);
            return;
        };
        let mut done = 0;
        for found in trie.find_iter(text) {
            self.encode_added(&text[done..found.start()], pass + 1, ids, segment);
            ids.push(token_ids[found.pattern().as_usize()]);
            done = found.end();
        }
        self.encode_added(&text[done..], pass + 1, ids, segment);
    }

    /// Whether this encoder gives `reference`'s ids on the probe texts.
    pub(crate) fn agrees_with(&self, reference: &tokenizers::Tokenizer) -> Result<(), Refusal> {
        for probe in PROBES {
            let want = reference
                .encode_fast(*probe, false)
                .map_err(|e| e.to_string())?;
            // A probe NFC would change is HF's at run time too; nothing to compare.
            if self.encode(probe).is_some_and(|ids| ids != want.get_ids()) {
                return Err(format!("ids differ from tokenizers' on {probe:?}"));
            }
        }
        Ok(())
    }
}

/// Whether the normalizer is NFC (else none); any other normalizer is refused.
fn nfc_normalizer(normalizer: Option<&Value>) -> Result<bool, Refusal> {
    let steps: Vec<&Value> = match normalizer {
        None | Some(Value::Null) => return Ok(false),
        Some(n) if n["type"] == "Sequence" => n["normalizers"]
            .as_array()
            .ok_or("normalizer sequence without steps")?
            .iter()
            .collect(),
        Some(n) => vec![n],
    };
    match steps[..] {
        [] => Ok(false),
        [step] if step["type"] == "NFC" => Ok(true),
        _ => Err(format!(
            "normalizer {}",
            normalizer.map_or(Value::Null, Clone::clone)
        )),
    }
}

/// The `Split` steps of a `ByteLevel`-terminated pre-tokenizer.
fn splitters(pre_tokenizer: Option<&Value>) -> Result<Vec<Splitter>, Refusal> {
    let steps: Vec<&Value> = match pre_tokenizer {
        Some(p) if p["type"] == "Sequence" => p["pretokenizers"]
            .as_array()
            .ok_or("pre-tokenizer sequence without steps")?
            .iter()
            .collect(),
        Some(p) if !p.is_null() => vec![p],
        _ => return Err("no pre-tokenizer".into()),
    };
    let (last, splits) = steps.split_last().ok_or("empty pre-tokenizer sequence")?;
    if last["type"] != "ByteLevel" || last["add_prefix_space"] != false {
        return Err("the pre-tokenizer does not end in ByteLevel without a prefix space".into());
    }
    let mut splitters = Vec::new();
    for step in splits {
        if step["type"] != "Split" || step["behavior"] != "Isolated" || step["invert"] != false {
            return Err(format!("pre-tokenizer step {step}"));
        }
        let pattern = match (&step["pattern"]["Regex"], &step["pattern"]["String"]) {
            (Value::String(re), _) => re.clone(),
            (_, Value::String(s)) => regex_syntax::escape(s),
            _ => return Err(format!("split pattern {}", step["pattern"])),
        };
        splitters.push(Splitter::new(&pattern)?);
    }
    if last["use_regex"] != false {
        splitters.push(Splitter::new(GPT2_PATTERN)?);
    }
    Ok(splitters)
}

fn model(model: &Value) -> Result<BytePairModel, Refusal> {
    if model["type"] != "BPE" {
        return Err(format!("model {}", model["type"]));
    }
    let unset = |key: &str| {
        model
            .get(key)
            .map_or(true, |v| v.is_null() || v == false || v == "" || v == 0.0)
    };
    for key in [
        "dropout",
        "continuing_subword_prefix",
        "end_of_word_suffix",
        "byte_fallback",
    ] {
        if !unset(key) {
            return Err(format!("BPE `{key}` is set"));
        }
    }
    let vocab =
        AHashMap::<String, u32>::deserialize(&model["vocab"]).map_err(|e| format!("vocab: {e}"))?;
    let merges = model["merges"]
        .as_array()
        .ok_or("no merges")?
        .iter()
        .map(|m| match m {
            Value::String(s) => s.split_once(' ').map(|(a, b)| (a.to_owned(), b.to_owned())),
            Value::Array(pair) => match (pair.first(), pair.get(1)) {
                (Some(Value::String(a)), Some(Value::String(b))) => Some((a.clone(), b.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or("a merge is not a pair of tokens")?;
    let ignore_merges = model["ignore_merges"] == true;
    BytePairModel::new(&vocab, &merges, ignore_merges)
}

#[cfg(test)]
mod tests;
