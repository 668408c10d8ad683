//! The sonnet dataset (`--dataset-name sonnet`, `--dataset-path` a text file of lines), built
//! as vLLM built it, with its flags and defaults (vLLM 0.33 no longer has the dataset):
//! every prompt is one instruction line, then the file's first lines (as many as fit
//! `--sonnet-prefix-len` tokens on average: the prefix all prompts share), then lines drawn
//! at random (with replacement) up to `--sonnet-input-len` tokens on average; a draw over
//! `--sonnet-input-len` tokens is drawn again. Each request asks for `--sonnet-output-len`
//! tokens.
//!
//! Lengths are counted on the prompt in the model's chat template (one user turn, the
//! assistant's turn opened), with the tokenizer's special tokens, as vLLM counts them. A
//! completions request sends that templated text; a chat request (openai-chat, Responses,
//! Messages) sends the lines as they are, since the server applies the template (vLLM's
//! openai-chat). `--skip-chat-template` (a vrs option here) sends and counts a completions
//! prompt without the template.

use std::path::{Path, PathBuf};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use vrs_text::ChatTemplate;

use super::file::templated;
use super::{load_tokenizer, Prompt};

/// vLLM's defaults (`--sonnet-*`).
pub const DEFAULT_INPUT_LEN: usize = 550;
pub const DEFAULT_OUTPUT_LEN: usize = 150;
pub const DEFAULT_PREFIX_LEN: usize = 200;

/// The line every prompt starts with (vLLM's wording).
pub const INSTRUCTION: &str = "Pick as many lines as you can from these poem lines:\n";

/// Draws allowed per requested prompt before the lengths are called impossible.
const DRAWS_PER_PROMPT: usize = 100;

/// The `--sonnet-*` token counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SonnetShape {
    pub input_len: usize,
    pub output_len: usize,
    pub prefix_len: usize,
}

/// What a request sends, and what its length is counted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SonnetFormat {
    /// The prompt in the model's chat template, sent and counted so (completions).
    Template,
    /// The lines as they are, counted in the chat template the server applies (chat).
    ServerTemplate,
    /// The lines as they are, sent and counted so (`--skip-chat-template`).
    Raw,
}

/// A sonnet dataset to draw `num_prompts` requests from.
#[derive(Debug, Clone, PartialEq)]
pub struct SonnetSpec {
    pub path: PathBuf,
    pub shape: SonnetShape,
    pub format: SonnetFormat,
    pub num_prompts: usize,
    pub seed: u64,
}

/// The requests of `spec`, with the tokenizer (and chat template) of `model_dir`.
pub fn sonnet_prompts(model_dir: &Path, spec: &SonnetSpec) -> Result<Vec<Prompt>, String> {
    let tokenizer = load_tokenizer(model_dir)?;
    let template = match spec.format {
        SonnetFormat::Raw => None,
        SonnetFormat::Template | SonnetFormat::ServerTemplate => Some(
            ChatTemplate::from_config(tokenizer.config(), None).map_err(|e| {
                format!(
                    "the sonnet dataset counts its prompts in the model's chat template, as \
                     vLLM's: {e} (with a completions backend, --skip-chat-template sends and \
                     counts the lines as they are)"
                )
            })?,
        ),
    };
    let path = &spec.path;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the sonnet dataset {}: {e}", path.display()))?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let count = |text: &str| {
        tokenizer
            .encode(text, true)
            .map(|ids| ids.len())
            .map_err(|e| format!("{}: cannot tokenize: {e}", path.display()))
    };
    let render = |body: &str| match &template {
        Some(template) => templated(template, body),
        None => Ok(body.to_string()),
    };
    let mut line_tokens = 0;
    for line in &lines {
        line_tokens += count(line)?;
    }
    if line_tokens == 0 {
        return Err(format!(
            "the sonnet dataset {} has no text: it needs lines to draw prompts from",
            path.display()
        ));
    }
    let avg = line_tokens as f64 / lines.len() as f64;
    let SonnetShape {
        input_len,
        output_len,
        prefix_len,
    } = spec.shape;
    let base = count(&render(INSTRUCTION)?)?;
    if input_len <= base {
        return Err(format!(
            "--sonnet-input-len ({input_len}) must be more than the {base} tokens of the \
             sonnet prompt's instruction line{}",
            if template.is_some() {
                " in the chat template"
            } else {
                ""
            }
        ));
    }
    // vLLM's line counts: the token budget beyond the instruction over the mean line,
    // rounded as Python rounds (half to even).
    let lines_for = |len: usize| {
        ((len as f64 - base as f64) / avg)
            .round_ties_even()
            .max(0.0) as usize
    };
    let (num_input, num_prefix) = (lines_for(input_len), lines_for(prefix_len));
    let mut head = String::from(INSTRUCTION);
    head.extend(lines[..num_prefix.min(lines.len())].iter().copied());
    let head_len = count(&render(&head)?)?;
    if head_len > input_len {
        return Err(format!(
            "--sonnet-prefix-len ({prefix_len}) does not fit --sonnet-input-len \
             ({input_len}): the instruction and the {} shared lines of {} are {head_len} \
             tokens; lower --sonnet-prefix-len or raise --sonnet-input-len",
            num_prefix.min(lines.len()),
            path.display()
        ));
    }
    let extra = num_input.saturating_sub(num_prefix);
    let draws = spec.num_prompts.saturating_mul(DRAWS_PER_PROMPT);
    let mut rng = SmallRng::seed_from_u64(spec.seed);
    let mut prompts = Vec::with_capacity(spec.num_prompts);
    for _ in 0..draws {
        if prompts.len() == spec.num_prompts {
            break;
        }
        let mut body = head.clone();
        for _ in 0..extra {
            body.push_str(lines[rng.random_range(0..lines.len())]);
        }
        let formatted = render(&body)?;
        let prompt_len = count(&formatted)?;
        if prompt_len <= input_len {
            prompts.push(Prompt {
                text: match spec.format {
                    SonnetFormat::Template => formatted,
                    SonnetFormat::ServerTemplate | SonnetFormat::Raw => body,
                },
                prompt_len,
                output_len,
            });
        }
    }
    if prompts.len() < spec.num_prompts {
        return Err(format!(
            "the sonnet dataset {}: only {} of {draws} draws of {extra} random lines (about \
             {avg:.1} tokens each) fit --sonnet-input-len ({input_len}); raise \
             --sonnet-input-len",
            path.display(),
            prompts.len()
        ));
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests;
