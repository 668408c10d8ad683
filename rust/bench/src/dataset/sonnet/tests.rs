//! Unit tests of `sonnet.rs`, on the word-level tokenizer of [`crate::dataset::word_model`]
//! (one token per word or punctuation run; its template adds `<s> user` and `assistant`).

use super::*;
use crate::dataset::word_model::{model_dir, model_dir_with};

/// Eight lines of four tokens each.
const EVEN: &str = "a b c d\ne f g h\na a b b\nc c d d\ne e f f\ng g h h\na c e g\nb d f h\n";

fn tokens(dir: &Path, text: &str) -> usize {
    load_tokenizer(dir)
        .unwrap()
        .encode(text, true)
        .unwrap()
        .len()
}

/// The instruction's tokens: in the template, and as it is.
fn instruction_len(dir: &Path) -> (usize, usize) {
    let templated = format!("<s> user {INSTRUCTION} assistant");
    (tokens(dir, &templated), tokens(dir, INSTRUCTION))
}

fn spec(dir: &Path, lines: &str, shape: SonnetShape, format: SonnetFormat, n: usize) -> SonnetSpec {
    let path = dir.join("lines.txt");
    std::fs::write(&path, lines).unwrap();
    SonnetSpec {
        path,
        shape,
        format,
        num_prompts: n,
        seed: 3,
    }
}

fn shape(input_len: usize, prefix_len: usize) -> SonnetShape {
    SonnetShape {
        input_len,
        output_len: 7,
        prefix_len,
    }
}

#[test]
fn templated_prompts_share_the_first_lines_then_draw_up_to_the_input_len() {
    let dir = model_dir();
    let (base, _) = instruction_len(dir.path());
    // 20 tokens beyond the instruction: 5 lines; 8 tokens of prefix: the first 2 lines.
    let s = spec(
        dir.path(),
        EVEN,
        shape(base + 20, base + 8),
        SonnetFormat::Template,
        20,
    );
    let prompts = sonnet_prompts(dir.path(), &s).unwrap();
    assert_eq!(prompts.len(), 20);
    let head = format!("<s> user {INSTRUCTION}a b c d\ne f g h\n");
    for p in &prompts {
        assert!(p.text.starts_with(&head), "{:?}", p.text);
        assert!(p.text.ends_with(" assistant"), "{:?}", p.text);
        // the instruction, 5 poem lines, the template's closing " assistant"
        assert_eq!(p.text.lines().count(), 1 + 5 + 1, "{:?}", p.text);
        assert_eq!(p.prompt_len, base + 20);
        assert_eq!(p.prompt_len, tokens(dir.path(), &p.text));
        assert_eq!(p.output_len, 7);
    }
    let mut bodies: Vec<&str> = prompts.iter().map(|p| p.text.as_str()).collect();
    bodies.sort_unstable();
    bodies.dedup();
    assert!(bodies.len() > 5, "the other lines are drawn at random");
    assert_eq!(prompts, sonnet_prompts(dir.path(), &s).unwrap(), "seeded");
    let other = sonnet_prompts(dir.path(), &SonnetSpec { seed: 4, ..s }).unwrap();
    assert_ne!(prompts, other);
}

#[test]
fn a_chat_backend_sends_the_lines_and_counts_them_in_the_template() {
    let dir = model_dir();
    let (base, _) = instruction_len(dir.path());
    let s = spec(
        dir.path(),
        EVEN,
        shape(base + 20, base + 8),
        SonnetFormat::ServerTemplate,
        6,
    );
    for p in sonnet_prompts(dir.path(), &s).unwrap() {
        assert!(p
            .text
            .starts_with(&format!("{INSTRUCTION}a b c d\ne f g h\n")));
        assert!(!p.text.contains("<s>") && !p.text.contains("assistant"));
        assert_eq!(
            p.prompt_len,
            base + 20,
            "counted as the server templates it"
        );
    }
}

#[test]
fn skip_chat_template_sends_and_counts_the_raw_lines_even_without_a_template() {
    let dir = model_dir_with(None);
    let (_, raw) = instruction_len(dir.path());
    let s = spec(dir.path(), EVEN, shape(raw + 12, 0), SonnetFormat::Raw, 4);
    for p in sonnet_prompts(dir.path(), &s).unwrap() {
        assert!(p.text.starts_with(INSTRUCTION));
        assert_eq!(
            (p.prompt_len, tokens(dir.path(), &p.text)),
            (raw + 12, raw + 12)
        );
    }
    let templated = SonnetSpec {
        format: SonnetFormat::Template,
        ..s
    };
    let err = sonnet_prompts(dir.path(), &templated).unwrap_err();
    assert!(
        err.contains("chat template") && err.contains("--skip-chat-template"),
        "{err}"
    );
}

#[test]
fn draws_over_the_input_len_are_drawn_again() {
    let dir = model_dir();
    let (base, _) = instruction_len(dir.path());
    // lines of 1 and 7 tokens (4 on average): 3 lines drawn, 3..21 tokens; <= 12 kept
    let lines = "a\na b c d e f g\n";
    let s = spec(
        dir.path(),
        lines,
        shape(base + 12, 0),
        SonnetFormat::Template,
        30,
    );
    let prompts = sonnet_prompts(dir.path(), &s).unwrap();
    assert_eq!(prompts.len(), 30);
    assert!(prompts.iter().all(|p| p.prompt_len <= base + 12));
    assert!(prompts.iter().any(|p| p.prompt_len == base + 3));
    assert!(prompts.iter().any(|p| p.prompt_len == base + 9));
}

#[test]
fn impossible_lengths_and_unreadable_files_are_errors_naming_them() {
    let dir = model_dir();
    let (base, _) = instruction_len(dir.path());
    let run = |lines: &str, shape: SonnetShape| {
        sonnet_prompts(
            dir.path(),
            &spec(dir.path(), lines, shape, SonnetFormat::Template, 5),
        )
        .unwrap_err()
    };
    let err = run(EVEN, shape(base, 0));
    assert!(
        err.contains(&format!(
            "--sonnet-input-len ({base}) must be more than the {base}"
        )),
        "{err}"
    );
    // every line (32 tokens) is prefix, over the 20 the input allows beyond the instruction
    let err = run(EVEN, shape(base + 20, base + 100));
    assert!(
        err.contains(&format!("--sonnet-prefix-len ({})", base + 100))
            && err.contains(&format!("--sonnet-input-len ({})", base + 20))
            && err.contains("lines.txt"),
        "{err}"
    );
    // 6 tokens beyond the instruction round to 2 lines of 4: no draw ever fits
    let err = run(EVEN, shape(base + 6, 0));
    assert!(
        err.contains("only 0 of 500 draws") && err.contains("lines.txt"),
        "{err}"
    );
    let err = run("\n\n", shape(base + 20, 0));
    assert!(err.contains("has no text"), "{err}");
    let missing = SonnetSpec {
        path: dir.path().join("absent.txt"),
        ..spec(
            dir.path(),
            EVEN,
            shape(base + 20, 0),
            SonnetFormat::Template,
            5,
        )
    };
    let err = sonnet_prompts(dir.path(), &missing).unwrap_err();
    assert!(
        err.contains("cannot read the sonnet dataset") && err.contains("absent.txt"),
        "{err}"
    );
}
