//! vLLM's `prefix_repetition` dataset: `num_prefixes` random prefixes of `prefix_len`
//! tokens, each followed by `num_prompts / num_prefixes` random suffixes of `suffix_len`
//! tokens (so a server's prefix cache can show), every request asking for `output_len`
//! tokens; the requests shuffled. As in vLLM, a prompt is the prefix's and the suffix's
//! token ids decoded together, and its length is their count.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::{exact_prompt, Prompt, TokenCodec};

/// vLLM's defaults (`--prefix-repetition-*`).
pub const DEFAULT_PREFIX_LEN: usize = 256;
pub const DEFAULT_SUFFIX_LEN: usize = 256;
pub const DEFAULT_NUM_PREFIXES: usize = 10;
pub const DEFAULT_OUTPUT_LEN: usize = 128;

/// Shape of the prefix_repetition dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixSpec {
    pub prefix_len: usize,
    pub suffix_len: usize,
    pub num_prefixes: usize,
    pub output_len: usize,
    pub num_prompts: usize,
    pub seed: u64,
}

/// The requests: `num_prefixes * (num_prompts / num_prefixes)` of them (vLLM's count,
/// which may be fewer than `num_prompts`).
pub fn prefix_repetition_prompts(
    codec: &impl TokenCodec,
    spec: &PrefixSpec,
) -> Result<Vec<Prompt>, String> {
    let per_prefix = spec.num_prompts / spec.num_prefixes.max(1);
    if spec.num_prefixes == 0 || per_prefix == 0 {
        return Err(format!(
            "num_prompts ({}) must be at least prefix_repetition_num_prefixes ({})",
            spec.num_prompts, spec.num_prefixes
        ));
    }
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let ids_of = |len: usize, rng: &mut SmallRng| -> Result<Vec<u32>, String> {
        let (text, _) = exact_prompt(codec, rng, len)?;
        codec.encode(&text)
    };
    let mut prompts = Vec::with_capacity(spec.num_prefixes * per_prefix);
    for _ in 0..spec.num_prefixes {
        let prefix = ids_of(spec.prefix_len, &mut rng)?;
        for _ in 0..per_prefix {
            let mut ids = prefix.clone();
            ids.extend(ids_of(spec.suffix_len, &mut rng)?);
            prompts.push(Prompt {
                text: codec.decode(&ids)?,
                prompt_len: ids.len(),
                output_len: spec.output_len,
            });
        }
    }
    prompts.shuffle(&mut rng);
    Ok(prompts)
}
