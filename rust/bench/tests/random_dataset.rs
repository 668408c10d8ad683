//! The random dataset with a real tokenizer: the built-in demo model's (a 128k-vocab
//! byte-level BPE), located through the Python package that builds it.

use std::path::PathBuf;
use std::process::Command;

use vrs_bench::dataset::{load_tokenizer, random_prompts, RandomSpec, TokenCodec};

fn demo_model_dir() -> PathBuf {
    // The checkout cargo runs the test from: a compile-time `env!` path may name another
    // checkout when the target dir is shared (cargo reuses the artifact).
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..");
    let python = std::env::var("VRS_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .args([
            "-c",
            "from engine.mock.demo_model import ensure_demo_model; print(ensure_demo_model())",
        ])
        .current_dir(&root)
        .env("PYTHONPATH", &root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python}: {e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn prompts_have_exactly_the_asked_token_count() {
    let tokenizer = load_tokenizer(&demo_model_dir()).unwrap();
    for input_len in [1, 7, 128, 512] {
        let spec = RandomSpec {
            input_len,
            output_len: 16,
            range_ratio: 0.0,
            prefix_len: 0,
            num_prompts: 48,
            seed: 1,
        };
        let prompts = random_prompts(&tokenizer, &spec).unwrap();
        assert_eq!(prompts.len(), 48);
        for p in &prompts {
            assert_eq!(p.prompt_len, input_len, "{:?}", p.text);
            assert_eq!(
                TokenCodec::encode(&tokenizer, &p.text).unwrap().len(),
                input_len,
                "{:?}",
                p.text
            );
            assert_eq!(p.output_len, 16);
        }
        let distinct: std::collections::HashSet<_> = prompts.iter().map(|p| &p.text).collect();
        assert!(distinct.len() > 40, "prompts should differ");
    }
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn random_prefix_len_prompts_share_their_first_tokens() {
    let tokenizer = load_tokenizer(&demo_model_dir()).unwrap();
    let spec = RandomSpec {
        input_len: 64,
        output_len: 4,
        range_ratio: 0.0,
        prefix_len: 32,
        num_prompts: 24,
        seed: 2,
    };
    let prompts = random_prompts(&tokenizer, &spec).unwrap();
    let ids: Vec<Vec<u32>> = prompts
        .iter()
        .map(|p| TokenCodec::encode(&tokenizer, &p.text).unwrap())
        .collect();
    for (p, ids) in prompts.iter().zip(&ids) {
        assert_eq!((p.prompt_len, ids.len()), (96, 96), "{:?}", p.text);
    }
    // the same 32 tokens first (the last may merge with the prompt's own first token)
    assert!(ids.iter().all(|i| i[..31] == ids[0][..31]));
    let own: std::collections::HashSet<_> = ids.iter().map(|i| &i[32..]).collect();
    assert!(own.len() > 20, "each prompt has its own 64 tokens");
}
