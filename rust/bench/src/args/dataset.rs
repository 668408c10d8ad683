//! The dataset keys of the args-json: `dataset` (vLLM's `--dataset-name`: random,
//! sharegpt, custom), `dataset_path`, `sharegpt_output_len`, `custom_output_len` (vLLM's
//! default 256; -1: each line's `output_tokens`) and `skip_chat_template`.

use std::path::PathBuf;

use crate::dataset::FileKind;

/// The datasets `vrs bench serve` takes.
pub const DATASETS: &[&str] = &["random", "sharegpt", "custom"];

/// vLLM's `--custom-output-len` default.
pub const CUSTOM_OUTPUT_LEN: i64 = 256;

/// The dataset keys as sent.
pub struct DatasetKeys {
    pub dataset: String,
    pub dataset_path: Option<String>,
    pub sharegpt_output_len: Option<usize>,
    pub custom_output_len: i64,
    pub skip_chat_template: bool,
}

/// The file dataset these keys ask for (`None`: random); errors name the key.
pub fn file_dataset(keys: DatasetKeys) -> Result<Option<(FileKind, PathBuf)>, String> {
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
    let kind = match keys.dataset.as_str() {
        "random" => {
            return match path {
                Some(path) => Err(format!(
                    "dataset_path ({}) is for the sharegpt and custom datasets; the random \
                     dataset reads no file",
                    path.display()
                )),
                None => Ok(None),
            }
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
        Some(path) => Ok(Some((kind, path))),
        None => Err(format!(
            "the {} dataset needs dataset_path (--dataset-path FILE)",
            keys.dataset
        )),
    }
}
