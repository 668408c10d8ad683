//! The random dataset (vLLM's `--dataset-name random`): prompts of an exact token length
//! for the served model's tokenizer, and the output length each request asks for; with
//! `--random-prefix-len N` every prompt starts with the same N tokens before its own
//! random input length (vLLM's: the total is N + the input length). The datasets read
//! from a file ([`file`]: sharegpt, custom; [`sonnet`]); vLLM's prefix_repetition
//! ([`prefix`]); multi-turn chats ([`conversation`]).

use std::path::Path;

pub mod conversation;
mod file;
pub mod prefix;
pub mod sonnet;
pub use conversation::{conversations, Conversation, ConversationSpec, Turn};
pub use file::{file_prompts, FileKind, FileSpec};
pub use prefix::{prefix_repetition_prompts, PrefixSpec};
pub use sonnet::{sonnet_prompts, SonnetFormat, SonnetShape, SonnetSpec};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// What the dataset needs from a tokenizer.
pub trait TokenCodec: Sync {
    /// Ids of `text`, without special tokens (no BOS).
    fn encode(&self, text: &str) -> Result<Vec<u32>, String>;
    /// Text of `ids`.
    fn decode(&self, ids: &[u32]) -> Result<String, String>;
    /// Prompt ids are taken below this.
    fn vocab_size(&self) -> usize;
    /// Special tokens are never taken.
    fn is_special(&self, id: u32) -> bool;
}

impl TokenCodec for vrs_text::Tokenizer {
    fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        vrs_text::Tokenizer::encode(self, text, false).map_err(|e| e.to_string())
    }
    fn decode(&self, ids: &[u32]) -> Result<String, String> {
        vrs_text::Tokenizer::decode(self, ids, false).map_err(|e| e.to_string())
    }
    fn vocab_size(&self) -> usize {
        vrs_text::Tokenizer::vocab_size(self)
    }
    fn is_special(&self, id: u32) -> bool {
        vrs_text::Tokenizer::is_special(self, id)
    }
}

/// Loads the tokenizer of a local model directory.
pub fn load_tokenizer(dir: &Path) -> Result<vrs_text::Tokenizer, String> {
    vrs_text::Tokenizer::from_dir(dir)
        .map_err(|e| format!("cannot load the tokenizer from {}: {e}", dir.display()))
}

/// One benchmark request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub text: String,
    /// Tokens of `text` for the tokenizer (the asked length, see [`exact_prompt`]).
    pub prompt_len: usize,
    /// `max_tokens` of the request.
    pub output_len: usize,
}

/// Shape of the random dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RandomSpec {
    pub input_len: usize,
    pub output_len: usize,
    /// Lengths are uniform in `[len * (1 - r), len * (1 + r)]`.
    pub range_ratio: f64,
    /// Tokens every prompt starts with (the same ones), before its own `input_len`.
    pub prefix_len: usize,
    pub num_prompts: usize,
    pub seed: u64,
}

/// Most decode/re-encode rounds spent on one prompt before taking the nearest.
const MAX_ROUNDS: usize = 16;

fn length_range(len: usize, ratio: f64, min: usize) -> (usize, usize) {
    let low = (len as f64 * (1.0 - ratio)).floor() as usize;
    let high = (len as f64 * (1.0 + ratio)).ceil() as usize;
    (low.max(min), high.max(low.max(min)))
}

/// Ids in vocabulary order from a random start, as vLLM's random dataset takes them
/// (`(offset + k) % vocab_size`), special tokens skipped.
struct IdRun {
    next: u32,
    vocab: u32,
}

impl IdRun {
    fn new(codec: &impl TokenCodec, rng: &mut SmallRng) -> Self {
        let vocab = codec.vocab_size().max(1) as u32;
        Self {
            next: rng.random_range(0..vocab),
            vocab,
        }
    }

    /// Appends ids to `out` until it holds `count` (none when every id is special).
    fn fill(&mut self, codec: &impl TokenCodec, count: usize, out: &mut Vec<u32>) {
        let mut skipped = 0;
        while out.len() < count && skipped < self.vocab {
            let id = self.next;
            self.next = (id + 1) % self.vocab;
            if codec.is_special(id) {
                skipped += 1;
            } else {
                skipped = 0;
                out.push(id);
            }
        }
    }
}

/// A text of exactly `target` tokens when one is found: a run of consecutive ids is
/// decoded, the text re-encoded, and the ids cut or topped up (the run continues) until
/// the round trip keeps the length. Returns the text and its true token count (the
/// nearest found, should none match).
pub fn exact_prompt(
    codec: &impl TokenCodec,
    rng: &mut SmallRng,
    target: usize,
) -> Result<(String, usize), String> {
    exact_prompt_after(codec, rng, &[], target)
}

/// As [`exact_prompt`], the text starting with `head`'s ids (decoded together with the
/// run that follows them, as vLLM decodes its prefix and the random tokens together).
pub fn exact_prompt_after(
    codec: &impl TokenCodec,
    rng: &mut SmallRng,
    head: &[u32],
    target: usize,
) -> Result<(String, usize), String> {
    if target == 0 {
        return Ok((String::new(), 0));
    }
    let mut run = IdRun::new(codec, rng);
    let mut ids = Vec::with_capacity(target + 8);
    ids.extend_from_slice(&head[..head.len().min(target)]);
    run.fill(codec, target, &mut ids);
    if ids.is_empty() {
        return Err("every token id of the tokenizer is a special token".into());
    }
    let mut best: Option<(String, usize)> = None;
    for _ in 0..MAX_ROUNDS {
        let text = codec.decode(&ids)?;
        let encoded = codec.encode(&text)?;
        let len = encoded.len();
        if len == target {
            return Ok((text, len));
        }
        if best
            .as_ref()
            .map_or(true, |(_, b)| len.abs_diff(target) < b.abs_diff(target))
        {
            best = Some((text, len));
        }
        ids = encoded;
        if len > target {
            ids.truncate(target);
        } else {
            run.fill(codec, target, &mut ids);
        }
    }
    best.ok_or_else(|| "no prompt could be generated".into())
}

fn prompt_seed(seed: u64, index: usize) -> u64 {
    seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// `spec.num_prompts` prompts, deterministic for a seed (whatever the thread count).
pub fn random_prompts(codec: &impl TokenCodec, spec: &RandomSpec) -> Result<Vec<Prompt>, String> {
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let (in_lo, in_hi) = length_range(spec.input_len, spec.range_ratio, 0);
    let (out_lo, out_hi) = length_range(spec.output_len, spec.range_ratio, 1);
    let lens: Vec<(usize, usize)> = (0..spec.num_prompts)
        .map(|_| {
            (
                rng.random_range(in_lo..=in_hi),
                rng.random_range(out_lo..=out_hi),
            )
        })
        .collect();
    // The shared prefix: drawn once, after the lengths (no prefix draws nothing).
    let prefix = match spec.prefix_len {
        0 => Vec::new(),
        len => codec.encode(&exact_prompt(codec, &mut rng, len)?.0)?,
    };
    let make = |index: usize| -> Result<Prompt, String> {
        let (input_len, output_len) = lens[index];
        let mut rng = SmallRng::seed_from_u64(prompt_seed(spec.seed, index));
        let target = prefix.len() + input_len;
        let (text, prompt_len) = exact_prompt_after(codec, &mut rng, &prefix, target)?;
        Ok(Prompt {
            text,
            prompt_len,
            output_len,
        })
    };
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(spec.num_prompts.div_ceil(32))
        .max(1);
    let per_thread = spec.num_prompts.div_ceil(threads);
    let parts: Vec<Result<Vec<Prompt>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let make = &make;
                scope.spawn(move || {
                    let end = ((t + 1) * per_thread).min(spec.num_prompts);
                    (t * per_thread..end)
                        .map(make)
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("prompt generation panicked".into()))
            })
            .collect()
    });
    let mut prompts = Vec::with_capacity(spec.num_prompts);
    for part in parts {
        prompts.extend(part?);
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod word_model;
