//! Encoding speed: the fast byte-level BPE encoder against the `tokenizers` pipeline on
//! the same tokenizer, in one process, taking turns.
//!
//! ```text
//! cargo run --release -p vrs-text --example encode_speed -- MODEL_DIR CORPUS.jsonl
//! ```
//!
//! Texts: the messages (and tool definitions) of the `short`, `long` and `tools` bodies of
//! `tests/render_corpus/requests.jsonl`, and 200 random prompts of 512 token ids decoded
//! to text (what `vrs bench serve --dataset random` sends: runs of consecutive ids).

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use serde_json::Value;
use vrs_text::Tokenizer;

fn body_text(body: &Value) -> String {
    let mut text = String::new();
    for message in body["messages"].as_array().into_iter().flatten() {
        text.push_str(message["content"].as_str().unwrap_or_default());
        text.push('\n');
    }
    if let Some(tools) = body.get("tools") {
        text.push_str(&tools.to_string());
    }
    text
}

/// Seconds per pass over `texts`, best of `rounds`, and the tokens of one pass.
fn time(tok: &Tokenizer, texts: &[String], rounds: usize) -> Result<(f64, usize), String> {
    let mut best = f64::INFINITY;
    let mut tokens = 0;
    for _ in 0..rounds {
        let start = Instant::now();
        tokens = 0;
        for text in texts {
            tokens += tok.encode(text, false).map_err(|e| e.to_string())?.len();
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    Ok((best, tokens))
}

fn run(model: &Path, corpus: &Path) -> Result<(), String> {
    let start = Instant::now();
    let fast = Tokenizer::from_dir(model).map_err(|e| e.to_string())?;
    let fast_load = start.elapsed();
    fast.fast_encoder()
        .map_err(|why| format!("no fast encoder for this tokenizer: {why}"))?;
    std::env::set_var(vrs_text::FAST_ENCODER_ENV, "0");
    let start = Instant::now();
    let pipeline = Tokenizer::from_dir(model).map_err(|e| e.to_string())?;
    println!(
        "load: {:.0} ms with the fast paths, {:.0} ms without\n",
        fast_load.as_secs_f64() * 1e3,
        start.elapsed().as_secs_f64() * 1e3
    );
    let corpus = std::fs::read_to_string(corpus).map_err(|e| e.to_string())?;
    let mut sets: Vec<(String, Vec<String>)> = Vec::new();
    for line in corpus.lines() {
        let entry: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
        let name = entry["name"].as_str().unwrap_or_default();
        if ["short", "long", "tools"].contains(&name) {
            sets.push((name.to_owned(), vec![body_text(&entry["body"])]));
        }
    }
    // As `vrs bench serve --dataset random` (and vLLM's) makes them: 512 consecutive ids
    // from a pseudo-random start, special tokens skipped.
    let vocab = pipeline.vocab_size() as u32;
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut random = Vec::new();
    for _ in 0..200 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let start = (state % u64::from(vocab)) as u32;
        let ids: Vec<u32> = (0..vocab)
            .map(|k| (start + k) % vocab)
            .filter(|&id| !pipeline.is_special(id))
            .take(512)
            .collect();
        random.push(pipeline.decode(&ids, false).map_err(|e| e.to_string())?);
    }
    sets.push(("random 512".to_owned(), random));
    println!("| text | tokens | tokenizers (µs) | fast (µs) | speed-up |");
    println!("|---|---:|---:|---:|---:|");
    for (name, texts) in &sets {
        let rounds = (200_000 / texts.iter().map(String::len).sum::<usize>()).clamp(5, 2000);
        let (slow, tokens) = time(&pipeline, texts, rounds)?;
        let (quick, same) = time(&fast, texts, rounds)?;
        if same != tokens {
            return Err(format!(
                "{name}: {same} tokens from the fast encoder, {tokens} expected"
            ));
        }
        let per = |s: f64| s / texts.len() as f64 * 1e6;
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1}× |",
            tokens / texts.len(),
            per(slow),
            per(quick),
            slow / quick
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, model, corpus] = &args[..] else {
        eprintln!("usage: encode_speed MODEL_DIR CORPUS.jsonl");
        return ExitCode::from(2);
    };
    match run(Path::new(model), Path::new(corpus)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("encode_speed: {e}");
            ExitCode::FAILURE
        }
    }
}
