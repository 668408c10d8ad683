//! The datasets read from a file, as vLLM's bench reads them:
//!
//! * `sharegpt` (`--dataset-path` a ShareGPT-format JSON list): the entries with two turns
//!   or more, shuffled with the seed; each gives its first turn as the prompt and asks for
//!   as many tokens as its second turn has (`--sharegpt-output-len` overrides); pairs
//!   vLLM would prune (a prompt or answer under 4 tokens, a prompt over 1024, both over
//!   2048) are skipped;
//! * `custom` (`--dataset-path` a JSONL file of `{"prompt": TEXT, "output_tokens": N?}`):
//!   the lines shuffled with the seed; each prompt wrapped in the model's chat template as
//!   one user turn (not with `--skip-chat-template`); `--custom-output-len` tokens asked
//!   for (default 256), or with -1 each line's `output_tokens`.
//!
//! Too few usable entries for `--num-prompts` are drawn again at random (vLLM's
//! oversampling). Prompt lengths are the tokenizer's count with its special tokens, as
//! `tokenizer(prompt).input_ids` in vLLM. A file that cannot be read is an error naming
//! the file, and the line (JSONL) or entry (JSON) at fault.

use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use vrs_text::{ChatTemplate, ChatTemplateInput, Tokenizer};

use super::Prompt;

/// vLLM's pruning bounds (`is_valid_sequence`).
const MIN_LEN: usize = 4;
const MAX_PROMPT_LEN: usize = 1024;
const MAX_TOTAL_LEN: usize = 2048;

/// Which file dataset, with its own options.
#[derive(Debug, Clone, PartialEq)]
pub enum FileKind {
    /// `output_len`: `--sharegpt-output-len` (`None`: each answer's length).
    ShareGpt { output_len: Option<usize> },
    /// `output_len`: `--custom-output-len` (`None`: each line's `output_tokens`, vLLM's
    /// -1); `chat_template`: wrap each prompt in the model's template.
    Custom {
        output_len: Option<usize>,
        chat_template: bool,
    },
}

/// A file dataset to draw `num_prompts` requests from.
#[derive(Debug, Clone, PartialEq)]
pub struct FileSpec {
    pub kind: FileKind,
    pub path: PathBuf,
    pub num_prompts: usize,
    pub seed: u64,
}

/// The requests of `spec`, tokenized with the model's tokenizer (from `model_dir`, whose
/// chat template the custom dataset uses).
pub fn file_prompts(model_dir: &Path, spec: &FileSpec) -> Result<Vec<Prompt>, String> {
    let tokenizer = Tokenizer::from_dir(model_dir).map_err(|e| {
        format!(
            "cannot load the tokenizer from {}: {e}",
            model_dir.display()
        )
    })?;
    let text = std::fs::read_to_string(&spec.path)
        .map_err(|e| format!("cannot read the dataset {}: {e}", spec.path.display()))?;
    let count = |text: &str| {
        tokenizer
            .encode(text, true)
            .map(|ids| ids.len())
            .map_err(|e| format!("{}: cannot tokenize: {e}", spec.path.display()))
    };
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let found = match &spec.kind {
        FileKind::ShareGpt { output_len } => {
            let mut pairs = sharegpt_pairs(&spec.path, &text)?;
            pairs.shuffle(&mut rng);
            let mut found = Vec::new();
            for (prompt, answer) in pairs {
                if found.len() == spec.num_prompts {
                    break;
                }
                let prompt_len = count(&prompt)?;
                let wanted = match output_len {
                    Some(n) => *n,
                    None => count(&answer)?,
                };
                if kept(prompt_len, wanted, output_len.is_some()) {
                    found.push(Prompt {
                        text: prompt,
                        prompt_len,
                        output_len: wanted,
                    });
                }
            }
            found
        }
        FileKind::Custom {
            output_len,
            chat_template,
        } => {
            let mut lines = custom_lines(&spec.path, &text, output_len.is_none())?;
            lines.shuffle(&mut rng);
            lines.truncate(spec.num_prompts);
            let template = if *chat_template {
                Some(
                    ChatTemplate::from_config(tokenizer.config(), None).map_err(|e| {
                        format!(
                            "the custom dataset wraps prompts in the model's chat template: {e} \
                         (or pass --skip-chat-template)"
                        )
                    })?,
                )
            } else {
                None
            };
            let mut found = Vec::new();
            for (prompt, own) in lines {
                let text = match &template {
                    Some(template) => templated(template, &prompt)?,
                    None => prompt,
                };
                found.push(Prompt {
                    prompt_len: count(&text)?,
                    text,
                    output_len: output_len.or(own).unwrap_or(1),
                });
            }
            found
        }
    };
    if found.is_empty() {
        return Err(format!(
            "the dataset {} has no usable entry (ShareGPT: two turns or more, a prompt of \
             4 to 1024 tokens and an answer of 4 or more, 2048 in all)",
            spec.path.display()
        ));
    }
    Ok(oversampled(found, spec.num_prompts, &mut rng))
}

/// vLLM's `is_valid_sequence`.
fn kept(prompt_len: usize, output_len: usize, fixed_output: bool) -> bool {
    prompt_len >= MIN_LEN
        && (fixed_output || output_len >= MIN_LEN)
        && prompt_len <= MAX_PROMPT_LEN
        && prompt_len + output_len <= MAX_TOTAL_LEN
}

/// Draws more of `found` at random until there are `wanted` (vLLM's oversampling).
fn oversampled(mut found: Vec<Prompt>, wanted: usize, rng: &mut SmallRng) -> Vec<Prompt> {
    let have = found.len();
    while found.len() < wanted {
        let again = found[rng.random_range(0..have)].clone();
        found.push(again);
    }
    found
}

/// The (first turn, second turn) of each entry with two turns or more.
fn sharegpt_pairs(path: &Path, text: &str) -> Result<Vec<(String, String)>, String> {
    let at = |what: String| format!("{}: {what}", path.display());
    let data: Value = serde_json::from_str(text)
        .map_err(|e| at(format!("not ShareGPT JSON (line {}): {e}", e.line())))?;
    let entries = data
        .as_array()
        .ok_or_else(|| at("not ShareGPT JSON: expected a list of entries".into()))?;
    let mut pairs = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        let Some(turns) = entry.get("conversations").and_then(Value::as_array) else {
            continue;
        };
        if turns.len() < 2 {
            continue;
        }
        let turn = |k: usize| {
            turns[k]
                .get("value")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| {
                    at(format!(
                        "entry {i}: conversations[{k}] has no string \"value\""
                    ))
                })
        };
        pairs.push((turn(0)?, turn(1)?));
    }
    Ok(pairs)
}

/// Each line's prompt and `output_tokens` (needed when `need_output`).
fn custom_lines(
    path: &Path,
    text: &str,
    need_output: bool,
) -> Result<Vec<(String, Option<usize>)>, String> {
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |what: &str| format!("{} line {}: {what}", path.display(), i + 1);
        let value: Value =
            serde_json::from_str(line).map_err(|e| at(&format!("not a JSON object: {e}")))?;
        let prompt = value
            .get("prompt")
            .and_then(Value::as_str)
            .ok_or_else(|| at("no string \"prompt\""))?;
        let output = match value.get("output_tokens") {
            None | Some(Value::Null) => None,
            Some(n) => Some(
                n.as_u64()
                    .filter(|&n| n > 0)
                    .ok_or_else(|| at("\"output_tokens\" must be a positive integer"))?
                    as usize,
            ),
        };
        if need_output && output.is_none() {
            return Err(at(
                "no \"output_tokens\": give each line one, or --custom-output-len",
            ));
        }
        lines.push((prompt.to_string(), output));
    }
    Ok(lines)
}

/// `prompt` as one user turn of the chat template, the assistant's turn opened.
pub(super) fn templated(template: &ChatTemplate, prompt: &str) -> Result<String, String> {
    let input = ChatTemplateInput {
        messages: vec![serde_json::json!({"role": "user", "content": prompt})],
        add_generation_prompt: true,
        ..ChatTemplateInput::default()
    };
    template
        .render(&input)
        .map_err(|e| format!("the chat template failed on a prompt: {e}"))
}

#[cfg(test)]
mod tests;
