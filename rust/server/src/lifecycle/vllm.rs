//! vrs-rs in front of vLLM 0.33's engine-core processes (issue #33's three ways in): the
//! supervisor-owned start under `vllm serve` ([`frontend`]), and `serve --engine vllm`
//! ([`serve`]), which starts vLLM's headless engine ([`launch`]) or waits for remote
//! ones. Both connect here: vLLM's ready responses become vrs's [`Ready`] with what the
//! model directory says, and the engine client speaks vLLM's wire.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use vrs_engine_client::vllm::{to_vrs_ready, Coordinator, ModelInfo, VllmWire};
use vrs_engine_client::EngineClient;
use vrs_wire::vllm::EngineCoreReadyResponse;
use vrs_wire::Ready;

use crate::args::ServeArgs;
use crate::text::Text;

pub mod frontend;
pub mod launch;
pub mod serve;

fn read_json(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn id_list(value: Option<&Value>) -> Vec<u32> {
    match value {
        Some(Value::Number(n)) => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .into_iter()
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
            .collect(),
        _ => Vec::new(),
    }
}

/// What vLLM's ready response does not carry, from the model directory: the vocabulary
/// size (`config.json`, its `text_config`, else the tokenizer's) and the EOS ids
/// (`generation_config.json`, else `config.json`, as vrs's engine reads them).
pub fn model_info(args: &ServeArgs, text: &Text) -> ModelInfo {
    let dir = Path::new(&args.model);
    let config = read_json(&dir.join("config.json")).unwrap_or(Value::Null);
    let vocab_size = config
        .get("vocab_size")
        .or_else(|| config.get("text_config").and_then(|c| c.get("vocab_size")))
        .and_then(Value::as_u64)
        .unwrap_or(text.0.vocab_size() as u64);
    let mut eos_token_ids = read_json(&dir.join("generation_config.json"))
        .map(|g| id_list(g.get("eos_token_id")))
        .unwrap_or_default();
    if eos_token_ids.is_empty() {
        eos_token_ids = id_list(config.get("eos_token_id"));
    }
    ModelInfo {
        vocab_size,
        eos_token_ids,
        model_name: args.served_model_name().to_owned(),
    }
}

/// Why `serve --engine vllm` cannot run `size` engines of this model, if it cannot: a
/// mixture-of-experts model (vLLM's `is_moe`: `num_experts`, `moe_num_experts`,
/// `n_routed_experts` or `num_local_experts` in `config.json` or its `text_config`)
/// with data parallelism needs vLLM's coordinator, which only `vllm serve` runs.
pub fn needs_coordinator(args: &ServeArgs, size: u16) -> Option<String> {
    if size <= 1 {
        return None;
    }
    let config = read_json(&Path::new(&args.model).join("config.json"))?;
    let experts = |c: &Value| {
        [
            "num_experts",
            "moe_num_experts",
            "n_routed_experts",
            "num_local_experts",
        ]
        .iter()
        .filter_map(|key| match c.get(key)? {
            Value::Array(items) => items.first().and_then(Value::as_u64),
            other => other.as_u64(),
        })
        .find(|&n| n > 0)
    };
    let n = experts(&config).or_else(|| config.get("text_config").and_then(experts))?;
    Some(format!(
        "--data-parallel-size {size} with a mixture-of-experts model ({n} experts): its          engines step in waves that vLLM's data-parallel coordinator starts, and vrs-rs          serve runs no coordinator; run `VLLM_USE_RUST_FRONTEND=1          VLLM_RUST_FRONTEND_PATH=vrs-rs vllm serve` (vLLM runs the coordinator and vrs-rs          follows it), or --data-parallel-size 1"
    ))
}

/// The engine client over vLLM's wire for `engines` (by engine index, the first being
/// `first`), following vLLM's data-parallel `coordinator` where there is one, and each
/// engine's READY in vrs's terms.
pub fn connect(
    input: zmq::Socket,
    output: zmq::Socket,
    engines: Vec<(Vec<u8>, EngineCoreReadyResponse)>,
    first: u16,
    info: &ModelInfo,
    coordinator: Option<Coordinator>,
) -> std::io::Result<(Arc<EngineClient>, Vec<Ready>)> {
    let blocks = engines.first().map_or(0, |(_, ready)| {
        u64::try_from(ready.num_gpu_blocks).unwrap_or(0)
    });
    let readies = engines
        .iter()
        .enumerate()
        .map(|(i, (_, ready))| to_vrs_ready(u32::from(first) + i as u32, ready, info))
        .collect();
    let identities = engines.into_iter().map(|(identity, _)| identity).collect();
    let mut wire = VllmWire::new(info.eos_token_ids.clone(), blocks);
    if let Some(coordinator) = coordinator {
        wire = wire.with_coordinator(coordinator);
    }
    let wire = Arc::new(wire);
    let client = EngineClient::start(input, output, identities, wire)?;
    Ok((client, readies))
}

#[cfg(test)]
mod tests;
