//! The random dataset (vLLM's `--dataset-name random`): prompts of an exact token length
//! for the served model's tokenizer, and the output length each request asks for; the
//! datasets read from a file ([`file`]: sharegpt, custom); vLLM's prefix_repetition
//! ([`prefix`]).

use std::path::Path;

mod file;
pub mod prefix;
pub use file::{file_prompts, FileKind, FileSpec};
pub use prefix::{prefix_repetition_prompts, PrefixSpec};

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
    if target == 0 {
        return Ok((String::new(), 0));
    }
    let mut run = IdRun::new(codec, rng);
    let mut ids = Vec::with_capacity(target + 8);
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
    let make = |index: usize| -> Result<Prompt, String> {
        let (input_len, output_len) = lens[index];
        let mut rng = SmallRng::seed_from_u64(prompt_seed(spec.seed, index));
        let (text, prompt_len) = exact_prompt(codec, &mut rng, input_len)?;
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
mod tests {
    use super::*;

    /// A toy tokenizer: each id is a word; ids 0..10 are single letters that merge
    /// pairwise ("a"+"b" encodes as one token), like BPE merges across boundaries.
    struct Toy;

    const WORDS: [&str; 12] = [
        "a", "b", "ab", "c", "d", "cd", "e", "f", "g", "h", "<s>", "z",
    ];

    impl TokenCodec for Toy {
        fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
            let mut ids = Vec::new();
            let mut rest = text;
            while !rest.is_empty() {
                let (id, len) = [("ab", 2), ("cd", 5)]
                    .iter()
                    .find(|(w, _)| rest.starts_with(w))
                    .map(|&(w, id)| (id, w.len()))
                    .or_else(|| {
                        WORDS
                            .iter()
                            .position(|w| rest.starts_with(w))
                            .map(|i| (i as u32, 1))
                    })
                    .ok_or_else(|| format!("cannot encode {rest:?}"))?;
                ids.push(id);
                rest = &rest[len..];
            }
            Ok(ids)
        }
        fn decode(&self, ids: &[u32]) -> Result<String, String> {
            Ok(ids.iter().map(|&i| WORDS[i as usize]).collect())
        }
        fn vocab_size(&self) -> usize {
            WORDS.len()
        }
        fn is_special(&self, id: u32) -> bool {
            id == 10
        }
    }

    #[test]
    fn prefix_repetition_shares_each_prefix_among_its_suffixes() {
        let spec = PrefixSpec {
            prefix_len: 6,
            suffix_len: 4,
            num_prefixes: 3,
            output_len: 7,
            num_prompts: 8,
            seed: 5,
        };
        let prompts = prefix_repetition_prompts(&Toy, &spec).unwrap();
        assert_eq!(prompts.len(), 6); // 3 prefixes x (8 / 3) suffixes, as vLLM counts
        assert!(prompts
            .iter()
            .all(|p| p.output_len == 7 && p.prompt_len == 10));
        let mut heads: Vec<Vec<u32>> = prompts
            .iter()
            .map(|p| Toy.encode(&p.text).unwrap()[..4].to_vec())
            .collect();
        heads.sort();
        heads.dedup();
        assert!(heads.len() <= 3, "{heads:?}"); // the prompts share 3 prefixes at most
        assert_eq!(prompts, prefix_repetition_prompts(&Toy, &spec).unwrap());
        let few = PrefixSpec {
            num_prompts: 2,
            ..spec
        };
        let err = prefix_repetition_prompts(&Toy, &few).unwrap_err();
        assert!(err.contains("num_prompts (2) must be at least"), "{err}");
    }

    #[test]
    fn ids_run_in_vocabulary_order_from_a_random_start_skipping_specials() {
        let mut rng = SmallRng::seed_from_u64(1);
        let mut run = IdRun::new(&Toy, &mut rng);
        let start = run.next;
        let mut ids = vec![99];
        run.fill(&Toy, 31, &mut ids);
        let expected: Vec<u32> = (0..40u32)
            .map(|k| (start + k) % 12)
            .filter(|&id| id != 10)
            .take(30)
            .collect();
        assert_eq!(ids[1..], expected[..], "wraps around, never the special id");
        let starts: std::collections::HashSet<u32> =
            (0..50).map(|_| IdRun::new(&Toy, &mut rng).next).collect();
        assert!(starts.len() > 6, "the start is random: {starts:?}");
    }

    #[test]
    fn a_vocabulary_of_special_tokens_only_is_an_error() {
        struct Specials;
        impl TokenCodec for Specials {
            fn encode(&self, _: &str) -> Result<Vec<u32>, String> {
                Ok(Vec::new())
            }
            fn decode(&self, _: &[u32]) -> Result<String, String> {
                Ok(String::new())
            }
            fn vocab_size(&self) -> usize {
                3
            }
            fn is_special(&self, _: u32) -> bool {
                true
            }
        }
        let mut rng = SmallRng::seed_from_u64(1);
        let err = exact_prompt(&Specials, &mut rng, 5).unwrap_err();
        assert!(err.contains("special"), "{err}");
    }

    #[test]
    fn prompts_have_the_exact_length_despite_merges() {
        let mut rng = SmallRng::seed_from_u64(7);
        for target in [1, 2, 3, 17, 100] {
            let (text, len) = exact_prompt(&Toy, &mut rng, target).unwrap();
            assert_eq!(len, target);
            assert_eq!(Toy.encode(&text).unwrap().len(), target, "{text}");
            assert!(!text.contains("<s>"), "special tokens are never sampled");
        }
        assert_eq!(exact_prompt(&Toy, &mut rng, 0).unwrap(), (String::new(), 0));
    }

    #[test]
    fn dataset_is_seeded_and_lengths_follow_the_range() {
        let spec = RandomSpec {
            input_len: 40,
            output_len: 10,
            range_ratio: 0.5,
            num_prompts: 200,
            seed: 3,
        };
        let a = random_prompts(&Toy, &spec).unwrap();
        assert_eq!(a, random_prompts(&Toy, &spec).unwrap());
        assert_eq!(a.len(), 200);
        assert!(a.iter().all(|p| (20..=60).contains(&p.prompt_len)));
        assert!(a.iter().all(|p| (5..=15).contains(&p.output_len)));
        assert!(
            a.iter().any(|p| p.prompt_len != 40),
            "lengths vary with a range ratio"
        );
        assert!(a
            .iter()
            .all(|p| Toy.encode(&p.text).unwrap().len() == p.prompt_len));
        let other = random_prompts(&Toy, &RandomSpec { seed: 4, ..spec }).unwrap();
        assert_ne!(a, other);
        let fixed = random_prompts(
            &Toy,
            &RandomSpec {
                range_ratio: 0.0,
                ..spec
            },
        )
        .unwrap();
        assert!(fixed
            .iter()
            .all(|p| p.prompt_len == 40 && p.output_len == 10));
    }
}
