//! A vLLM engine's `EngineCoreReadyResponse` as vrs's [`Ready`]: what the engine settled
//! on (context length, KV blocks) plus what the frontend reads from the model directory.

use vrs_wire::vllm::EngineCoreReadyResponse;
use vrs_wire::{Ready, Runner};

/// What vLLM's ready response does not say and the caller reads from the model's files.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The vocabulary size (`config.json`).
    pub vocab_size: u64,
    /// The EOS ids, primary first (`generation_config.json` / the tokenizer).
    pub eos_token_ids: Vec<u32>,
    /// The served model name.
    pub model_name: String,
}

/// The ready response of engine `engine_index` in vrs's terms (runner "generate").
pub fn to_vrs_ready(
    engine_index: u32,
    ready: &EngineCoreReadyResponse,
    model: &ModelInfo,
) -> Ready {
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ready {
        engine_index,
        max_model_len: count(ready.max_model_len),
        vocab_size: model.vocab_size,
        block_size: count(ready.block_size),
        num_kv_blocks: count(ready.num_gpu_blocks),
        eos_token_ids: model.eos_token_ids.clone(),
        model_name: model.model_name.clone(),
        is_mock: false,
        runner: Runner::Generate.as_str().to_owned(),
        pooling_tasks: Vec::new(),
        classify_labels: Vec::new(),
        ranks: Vec::new(),
    }
}
