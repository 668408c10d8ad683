//! The dataset keys of the args-json: `dataset` (vLLM's `--dataset-name`: random,
//! sharegpt, custom, sonnet, prefix_repetition), `dataset_path`, `sharegpt_output_len`,
//! `custom_output_len` (vLLM's default 256; -1: each line's `output_tokens`),
//! `skip_chat_template`, the `sonnet_*` and the `prefix_repetition_*` lengths,
//! `conversation_output_len`.

use std::path::PathBuf;

use crate::dataset::{FileKind, SonnetShape};

/// The datasets `vrs bench serve` takes.
pub const DATASETS: &[&str] = &[
    "random",
    "sharegpt",
    "custom",
    "sonnet",
    "prefix_repetition",
    "conversation",
];

/// Where the prompts come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetChoice {
    /// Generated: the `random_*` keys.
    Random,
    /// Read from a file.
    File(FileKind, PathBuf),
    /// vLLM's sonnet: lines of a text file; `chat_template`: a completions prompt is sent
    /// in the model's template (not with `skip_chat_template`).
    Sonnet {
        path: PathBuf,
        shape: SonnetShape,
        chat_template: bool,
    },
    /// vLLM's prefix_repetition: shared prefixes, then suffixes (token counts).
    PrefixRepetition {
        prefix_len: usize,
        suffix_len: usize,
        num_prefixes: usize,
        output_len: usize,
    },
    /// Multi-turn conversations read from a file; `output_len`: max_tokens of every turn
    /// (`None`: the length of the file's answer to it).
    Conversation {
        path: PathBuf,
        output_len: Option<usize>,
    },
}

/// vLLM's `--custom-output-len` default.
pub const CUSTOM_OUTPUT_LEN: i64 = 256;

/// The dataset keys as sent.
pub struct DatasetKeys {
    pub dataset: String,
    pub dataset_path: Option<String>,
    pub sharegpt_output_len: Option<usize>,
    pub custom_output_len: i64,
    pub skip_chat_template: bool,
    /// `sonnet_input_len`, `_output_len`, `_prefix_len`.
    pub sonnet: [usize; 3],
    /// `prefix_repetition_prefix_len`, `_suffix_len`, `_num_prefixes`, `_output_len`.
    pub prefix_repetition: [usize; 4],
    pub conversation_output_len: Option<usize>,
}

/// The dataset these keys ask for; errors name the key.
pub fn dataset_choice(keys: DatasetKeys) -> Result<DatasetChoice, String> {
    let path = keys
        .dataset_path
        .filter(|p| !p.is_empty())
        .map(PathBuf::from);
    if keys.sharegpt_output_len == Some(0) {
        return Err("sharegpt_output_len must be at least 1".into());
    }
    if keys.sharegpt_output_len.is_some() && keys.dataset != "sharegpt" {
        return Err(format!(
            "sharegpt_output_len is for the sharegpt dataset, not {}",
            keys.dataset
        ));
    }
    if keys.conversation_output_len.is_some() && keys.dataset != "conversation" {
        return Err(format!(
            "conversation_output_len is for the conversation dataset, not {}",
            keys.dataset
        ));
    }
    if keys.conversation_output_len == Some(0) {
        return Err("conversation_output_len must be at least 1".into());
    }
    let generated = |choice: DatasetChoice| match &path {
        Some(path) => Err(format!(
            "dataset_path ({}) is for the sharegpt, custom, sonnet and conversation \
             datasets; the {} \
             dataset reads no file",
            path.display(),
            keys.dataset
        )),
        None => Ok(choice),
    };
    let kind = match keys.dataset.as_str() {
        "random" => return generated(DatasetChoice::Random),
        "prefix_repetition" => {
            let [prefix_len, suffix_len, num_prefixes, output_len] = keys.prefix_repetition;
            if num_prefixes == 0 || output_len == 0 {
                return Err(
                    "prefix_repetition_num_prefixes and prefix_repetition_output_len must \
                     be at least 1"
                        .into(),
                );
            }
            return generated(DatasetChoice::PrefixRepetition {
                prefix_len,
                suffix_len,
                num_prefixes,
                output_len,
            });
        }
        "sonnet" => {
            let [input_len, output_len, prefix_len] = keys.sonnet;
            if output_len == 0 {
                return Err("sonnet_output_len (--sonnet-output-len) must be at least 1".into());
            }
            if prefix_len > input_len {
                return Err(format!(
                    "--sonnet-prefix-len ({prefix_len}) must not exceed --sonnet-input-len \
                     ({input_len}): the shared prefix is part of each prompt"
                ));
            }
            let path = path.ok_or("the sonnet dataset needs dataset_path (--dataset-path FILE)")?;
            return Ok(DatasetChoice::Sonnet {
                path,
                shape: SonnetShape {
                    input_len,
                    output_len,
                    prefix_len,
                },
                chat_template: !keys.skip_chat_template,
            });
        }
        "conversation" => {
            let path = path.ok_or(
                "the conversation dataset needs dataset_path (--dataset-path FILE): a JSON \
                 list of conversations",
            )?;
            return Ok(DatasetChoice::Conversation {
                path,
                output_len: keys.conversation_output_len,
            });
        }
        "sharegpt" => FileKind::ShareGpt {
            output_len: keys.sharegpt_output_len,
        },
        "custom" => FileKind::Custom {
            output_len: match keys.custom_output_len {
                -1 => None,
                n if n >= 1 => Some(n as usize),
                n => {
                    return Err(format!(
                        "custom_output_len must be at least 1, or -1 for each line's \
                         output_tokens; got {n}"
                    ))
                }
            },
            chat_template: !keys.skip_chat_template,
        },
        other => {
            return Err(format!(
                "dataset must be one of {}, got {other:?}",
                DATASETS.join(", ")
            ))
        }
    };
    match path {
        Some(path) => Ok(DatasetChoice::File(kind, path)),
        None => Err(format!(
            "the {} dataset needs dataset_path (--dataset-path FILE)",
            keys.dataset
        )),
    }
}
