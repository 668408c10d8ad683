//! Incremental detokenization for streaming: vLLM's prefix/read offsets.
//!
//! Decoding one token at a time breaks multi-byte characters (byte-level BPE splits emoji
//! and rare CJK across tokens) and spacing (SentencePiece drops a leading space at the
//! start of a sequence). So each step decodes a short window of ids starting at
//! `prefix_offset`, seeded with the prompt's last tokens, and emits only what the window
//! adds beyond the text already emitted. Trailing U+FFFD (an incomplete character) is held
//! back until more tokens complete it or [`IncrementalDetokenizer::finish`] is called.

use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// Prompt tokens the window starts with (vLLM's `INITIAL_INCREMENTAL_DETOKENIZATION_OFFSET`).
const PROMPT_SEED_TOKENS: usize = 5;

/// Turns generated token ids into text pieces as they arrive.
#[derive(Debug, Clone)]
pub struct IncrementalDetokenizer {
    tokenizer: Tokenizer,
    skip_special_tokens: bool,
    /// Prompt tail + generated ids; the window is `ids[prefix_offset..]`.
    ids: Vec<u32>,
    /// Start of the decode window.
    prefix_offset: usize,
    /// Ids before this are fully emitted (their text is stable).
    read_offset: usize,
    /// Length in bytes of `decode(ids[prefix_offset..read_offset])`.
    prefix_len: usize,
    /// Bytes of `decode(ids[prefix_offset..])` already accounted for (emitted or prefix).
    emitted_len: usize,
}

impl IncrementalDetokenizer {
    /// A detokenizer for one request; `prompt_ids` seed the window (only the last few
    /// are kept) so that the first generated token gets its spacing right.
    pub fn new(
        tokenizer: Tokenizer,
        prompt_ids: &[u32],
        skip_special_tokens: bool,
    ) -> Result<Self> {
        let mut seed = &prompt_ids[prompt_ids.len().saturating_sub(PROMPT_SEED_TOKENS)..];
        let mut seed_text = tokenizer.decode(seed, skip_special_tokens)?;
        if seed_text.ends_with('\u{FFFD}') {
            // The prompt ends inside a character (a prompt given as ids can): generated
            // bytes would merge with it, so start from a clean slate instead.
            seed = &[];
            seed_text.clear();
        }
        let prefix_len = seed_text.len();
        Ok(Self {
            tokenizer,
            skip_special_tokens,
            ids: seed.to_vec(),
            prefix_offset: 0,
            read_offset: seed.len(),
            prefix_len,
            emitted_len: prefix_len,
        })
    }

    /// Adds generated ids; returns the newly stable text (possibly empty).
    pub fn push(&mut self, new_ids: &[u32]) -> Result<String> {
        if new_ids.is_empty() {
            return Ok(String::new());
        }
        self.ids.extend_from_slice(new_ids);
        let text = self
            .tokenizer
            .decode(&self.ids[self.prefix_offset..], self.skip_special_tokens)?;
        let stable_len = text.trim_end_matches('\u{FFFD}').len();
        let out = self.take(&text, stable_len);
        if stable_len == text.len() && text.len() > self.prefix_len {
            // Everything up to here is final: slide the window.
            self.prefix_offset = self.read_offset;
            self.read_offset = self.ids.len();
            self.prefix_len = self
                .tokenizer
                .decode(
                    &self.ids[self.prefix_offset..self.read_offset],
                    self.skip_special_tokens,
                )?
                .len();
            self.emitted_len = self.prefix_len;
            if self.prefix_offset >= 256 {
                // Ids before the window are never read again.
                self.ids.drain(..self.prefix_offset);
                self.read_offset -= self.prefix_offset;
                self.prefix_offset = 0;
            }
        }
        Ok(out)
    }

    /// Whatever is still held back (e.g. an incomplete character at the very end).
    pub fn finish(&mut self) -> Result<String> {
        let text = self
            .tokenizer
            .decode(&self.ids[self.prefix_offset..], self.skip_special_tokens)?;
        Ok(self.take(&text, text.len()))
    }

    /// `text[emitted_len..end]`, advancing `emitted_len`; never splits a character.
    fn take(&mut self, text: &str, end: usize) -> String {
        if end <= self.emitted_len {
            return String::new();
        }
        let mut start = self.emitted_len;
        while !text.is_char_boundary(start) {
            start += 1;
        }
        self.emitted_len = end;
        text.get(start..end).unwrap_or_default().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::tests::deepseek;

    /// Pushes `ids` one at a time; returns the chunks (finish() last).
    fn stream(tok: &Tokenizer, prompt: &[u32], ids: &[u32], skip: bool) -> Vec<String> {
        let mut d = IncrementalDetokenizer::new(tok.clone(), prompt, skip).unwrap();
        let mut chunks: Vec<String> = ids.iter().map(|&id| d.push(&[id]).unwrap()).collect();
        chunks.push(d.finish().unwrap());
        chunks
    }

    const TEXTS: [&str; 6] = [
        "Hello, world! 你好，世界。こんにちは 🦀🎉👨‍👩‍👧",
        "Rare CJK: 𠀀𪚥龘䨻 and emoji 🫠🪿 mixed with ascii",
        "  leading spaces,\ttabs\nnewlines\r\n and 12345678 digits",
        "Ünïcödé çombining: e\u{301} a\u{308} — ‘quotes’ «guillemets»",
        "한국어 텍스트와 ไทย ภาษา और हिन्दी",
        "<｜User｜>special<｜end▁of▁sentence｜> tokens<｜Assistant｜>",
    ];

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn tokens_really_split_characters() {
        // Byte-level pieces: some single tokens decode to an incomplete character.
        let tok = deepseek();
        let ids = tok.encode(TEXTS[1], false).unwrap();
        let partial = ids
            .iter()
            .filter(|&&id| tok.decode(&[id], false).unwrap().contains('\u{FFFD}'));
        assert!(partial.count() >= 2, "expected split characters in {ids:?}");
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn concatenation_equals_full_decode() {
        let tok = deepseek();
        let prompt = tok
            .encode("<｜User｜>Say something<｜Assistant｜>", false)
            .unwrap();
        for skip in [false, true] {
            for text in TEXTS {
                let ids = tok.encode(text, false).unwrap();
                for seed in [&prompt[..], &[]] {
                    let chunks = stream(&tok, seed, &ids, skip);
                    let want = tok.decode(&ids, skip).unwrap();
                    assert_eq!(chunks.concat(), want, "skip={skip} text={text:?}");
                    assert!(
                        chunks.iter().all(|c| !c.contains('\u{FFFD}')),
                        "a chunk split a character: {chunks:?}"
                    );
                    assert!(
                        chunks.last().unwrap().is_empty(),
                        "finish() had leftovers: {chunks:?}"
                    );
                }
            }
        }
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn first_token_spacing_comes_from_the_prompt() {
        let tok = deepseek();
        let prompt = tok.encode("The answer is", false).unwrap();
        let ids = tok.encode(" forty two", false).unwrap();
        let chunks = stream(&tok, &prompt, &ids, true);
        assert_eq!(chunks[0], " forty");
        assert_eq!(chunks.concat(), " forty two");
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn random_ids_including_partial_bytes_and_specials() {
        let tok = deepseek();
        // Tokens that are incomplete UTF-8 on their own, plus a few special tokens.
        let partial: Vec<u32> = (100..30_000)
            .filter(|&id| tok.decode(&[id], false).unwrap().contains('\u{FFFD}'))
            .take(200)
            .collect();
        assert!(partial.len() > 20);
        let specials = [0u32, 1, 2, 128_800];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for round in 0..40 {
            let len = 1 + next(60) as usize;
            let ids: Vec<u32> = (0..len)
                .map(|_| match next(10) {
                    0..=4 => partial[next(partial.len() as u64) as usize],
                    5 => specials[next(4) as usize],
                    _ => next(tok.vocab_size() as u64) as u32,
                })
                .collect();
            let prompt_len = (next(4) as usize).min(ids.len());
            for skip in [false, true] {
                let chunks = stream(&tok, &ids[..prompt_len], &ids, skip);
                assert_eq!(
                    chunks.concat(),
                    tok.decode(&ids, skip).unwrap(),
                    "round {round} {ids:?}"
                );
            }
        }
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn multi_token_pushes_and_held_back_tail() {
        let tok = deepseek();
        let ids = tok.encode("ab 🦀", false).unwrap();
        let mut d = IncrementalDetokenizer::new(tok.clone(), &[], false).unwrap();
        // Everything but the last token: the crab's bytes are incomplete, so held back.
        let head = d.push(&ids[..ids.len() - 1]).unwrap();
        assert!(!head.contains('\u{FFFD}'));
        assert_eq!(head + &d.push(&ids[ids.len() - 1..]).unwrap(), "ab 🦀");
        assert_eq!(d.push(&[]).unwrap(), "");
        // An incomplete character at the very end comes out of finish() as U+FFFD.
        let mut d = IncrementalDetokenizer::new(tok.clone(), &[], false).unwrap();
        let crab = tok.encode("🦀", false).unwrap();
        assert!(crab.len() > 1);
        assert_eq!(d.push(&crab[..1]).unwrap(), "");
        assert_eq!(d.finish().unwrap(), tok.decode(&crab[..1], false).unwrap());
    }

    #[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
    #[test]
    fn long_streams_keep_working_after_compaction() {
        let tok = deepseek();
        let text = "長い文章 with words 🎉 ".repeat(120);
        let ids = tok.encode(&text, false).unwrap();
        assert!(ids.len() > 600);
        assert_eq!(stream(&tok, &[], &ids, true).concat(), text);
    }
}
