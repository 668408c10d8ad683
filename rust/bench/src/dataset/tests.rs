//! Unit tests of the generated datasets (random, prefix_repetition) on a toy tokenizer.

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
        prefix_len: 0,
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

/// The longest text every prompt starts with.
fn common_start(prompts: &[Prompt]) -> String {
    let first = prompts[0].text.as_str();
    let len = prompts.iter().fold(first.len(), |len, p| {
        first[..len]
            .chars()
            .zip(p.text.chars())
            .take_while(|(a, b)| a == b)
            .count()
    });
    first[..len].to_string()
}

#[test]
fn random_prefix_len_shares_the_first_tokens_and_adds_to_the_input_len() {
    let spec = RandomSpec {
        input_len: 10,
        output_len: 3,
        range_ratio: 0.0,
        prefix_len: 6,
        num_prompts: 50,
        seed: 9,
    };
    let prompts = random_prompts(&Toy, &spec).unwrap();
    assert_eq!(prompts.len(), 50);
    for p in &prompts {
        // vLLM's: the prefix comes on top of the input length
        assert_eq!((p.prompt_len, p.output_len), (16, 3), "{:?}", p.text);
        assert_eq!(Toy.encode(&p.text).unwrap().len(), 16, "{:?}", p.text);
    }
    let shared = common_start(&prompts);
    assert!(Toy.encode(&shared).unwrap().len() >= 6, "{shared:?}");
    assert!(
        prompts.iter().any(|p| p.text != prompts[0].text),
        "each prompt has its own tokens after the prefix"
    );
    assert_eq!(prompts, random_prompts(&Toy, &spec).unwrap(), "seeded");
    // without a prefix the prompts share (next to) nothing
    let none = random_prompts(
        &Toy,
        &RandomSpec {
            prefix_len: 0,
            ..spec
        },
    )
    .unwrap();
    assert!(Toy.encode(&common_start(&none)).unwrap().len() < 6);
    assert!(none.iter().all(|p| p.prompt_len == 10));
    // the range ratio varies the prompt's own part only
    let varied = random_prompts(
        &Toy,
        &RandomSpec {
            range_ratio: 0.5,
            ..spec
        },
    )
    .unwrap();
    assert!(varied
        .iter()
        .all(|p| (6 + 5..=6 + 15).contains(&p.prompt_len)));
    assert!(Toy.encode(&common_start(&varied)).unwrap().len() >= 6);
}
