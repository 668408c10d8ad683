//! Times chat-template rendering + tokenization of one conversation.
//!
//! `cargo run --release -p vrs-text --example bench_render -- TOKENIZER_DIR TEMPLATE_FILE [N]`

use std::path::Path;
use std::time::Instant;

use serde_json::json;
use vrs_text::{ChatTemplate, ChatTemplateInput, Tokenizer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: bench_render TOKENIZER_DIR TEMPLATE_FILE [N]".into());
    }
    let n: usize = args.get(3).map(|s| s.parse()).transpose()?.unwrap_or(2000);
    let tok = Tokenizer::from_dir(Path::new(&args[1]))?;
    let template = ChatTemplate::from_config(tok.config(), Some(Path::new(&args[2])))?;
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    for i in 0..8 {
        messages.push(json!({"role": "user", "content": format!("Question {i}: {}", "why is the sky blue? 天空为什么是蓝色的？ ".repeat(12))}));
        messages.push(json!({"role": "assistant", "content": format!("Answer {i}: {}", "Rayleigh scattering of sunlight. ".repeat(12))}));
    }
    let tools: Vec<_> = (0..8)
        .map(|i| json!({"type": "function", "function": {"name": format!("tool_{i}"), "description": "Does a thing with a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}}, "required": ["city"]}}}))
        .collect();
    let input = ChatTemplateInput {
        messages,
        tools: Some(tools),
        add_generation_prompt: true,
        ..Default::default()
    };
    let mut total_tokens = 0;
    let start = Instant::now();
    for _ in 0..n {
        let text = template.render(&input)?;
        total_tokens = tok.encode(&text, false)?.len();
    }
    let per = start.elapsed().as_secs_f64() / n as f64;
    println!(
        "{total_tokens} tokens; {:.1} us per render+tokenize",
        per * 1e6
    );
    let start = Instant::now();
    let mut text = String::new();
    for _ in 0..n {
        text = template.render(&input)?;
    }
    let per = start.elapsed().as_secs_f64() / n as f64;
    println!("{} chars; {:.1} us per render", text.len(), per * 1e6);
    Ok(())
}
