//! vLLM's `frontend` contract: the `--args-json` that `vllm serve` hands its Rust frontend
//! (`VLLM_USE_RUST_FRONTEND=1 VLLM_RUST_FRONTEND_PATH=vrs-rs`), mapped onto [`ServeArgs`].
//!
//! vLLM sends its non-default `vllm serve` arguments by argparse dest
//! (`jsonify_non_default_args`), plus `model_tag`, `engine_ready_timeout_secs` and
//! `http_timeout_keep_alive`. `server/contracts/vllm_serve_keys.json` (written from the
//! vllm 0.33.0 wheel by `tests/vllm_compat/serve_keys.py`) splits them into the engine's
//! keys and the frontend's. Each key is one of:
//! - mapped onto a vrs setting (model, names, TLS, CORS, parsers, queue limits, ...);
//! - without effect on what a client sees (log and docs switches, supervisor-only keys);
//! - the engine's: accepted silently (the engine already has them);
//! - a frontend key vrs-rs cannot honour, or one vLLM 0.33.0 does not send: start-up
//!   stops with an error naming every such key.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::vllm_keys::{hub_snapshot, inline_template, NOOP_KEYS, REFUSED_ENGINE_KEYS};
use super::ServeArgs;

const KEYS_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../server/contracts/vllm_serve_keys.json"
));

/// Where vLLM's frontends read the API key when `--api-key` is not given.
pub const VLLM_API_KEY_ENV: &str = "VLLM_API_KEY";

/// The keys of vLLM's args-json, by owner.
#[derive(Debug, Deserialize)]
pub struct ServeKeys {
    pub vllm_version: String,
    pub engine: Vec<String>,
    pub frontend: Vec<String>,
}

/// vLLM 0.33.0's `vllm serve` keys (`server/contracts/vllm_serve_keys.json`).
pub fn serve_keys() -> &'static ServeKeys {
    static KEYS: OnceLock<ServeKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        serde_json::from_str(KEYS_JSON).unwrap_or_else(|e| {
            panic!("server/contracts/vllm_serve_keys.json is committed valid JSON: {e}")
        })
    })
}

/// `vrs-rs frontend`'s settings under vLLM's contract.
#[derive(Debug, Clone)]
pub struct VllmFrontendArgs {
    pub serve: ServeArgs,
    /// `engine_ready_timeout_secs` (vLLM's `VLLM_ENGINE_READY_TIMEOUT_S`), when sent.
    pub ready_timeout: Option<Duration>,
}

/// Whether a frontend `--args-json` is vLLM's (it names the model `model_tag`, which
/// vrs's own contract never does).
pub fn is_vllm_json(text: &str) -> bool {
    matches!(serde_json::from_str::<Value>(text), Ok(Value::Object(map)) if map.contains_key("model_tag"))
}

/// The vrs key a vLLM key sets directly, and where (`true`: in the `http` object).
fn direct(key: &str) -> Option<(&'static str, bool)> {
    Some(match key {
        "host" => ("host", false),
        "port" => ("port", false),
        "chat_template_content_format" => ("chat_template_content_format", false),
        "tool_call_parser" => ("tool_call_parser", false),
        "scheduling_policy" => ("scheduling_policy", false),
        "shutdown_timeout" => ("shutdown_timeout", false),
        "log_level" => ("log_level", false),
        "max_num_queued_reqs" => ("max_num_queued_reqs", false),
        "max_num_queued_tokens" => ("max_num_queued_tokens", false),
        "otlp_traces_endpoint" => ("otlp_traces_endpoint", false),
        "enable_tokenizer_info_endpoint" => ("enable_tokenizer_info_endpoint", false),
        "allowed_origins" => ("allowed_origins", true),
        "allowed_methods" => ("allowed_methods", true),
        "allowed_headers" => ("allowed_headers", true),
        "allow_credentials" => ("allow_credentials", true),
        "ssl_keyfile" => ("ssl_keyfile", true),
        "ssl_certfile" => ("ssl_certfile", true),
        "ssl_ca_certs" => ("ssl_ca_certs", true),
        "ssl_cert_reqs" => ("ssl_cert_reqs", true),
        "enable_request_id_headers" => ("enable_request_id_headers", true),
        "h11_max_incomplete_event_size" => ("h11_max_incomplete_event_size", true),
        "http_timeout_keep_alive" => ("http_timeout_keep_alive", true),
        _ => return None,
    })
}

/// The one string of a key vLLM sends as a string or a list of strings (`--api-key`,
/// `--served-model-name`); vrs-rs takes one.
fn one_string(key: &str, value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(items) => match items.as_slice() {
            [Value::String(s)] => Ok(s.clone()),
            [] => Err(format!("{key}: an empty list")),
            _ => Err(format!(
                "{key}: vrs-rs takes one value, got {} ({value}); give one",
                items.len()
            )),
        },
        other => Err(format!("{key}: expected a string, got {other}")),
    }
}

fn string(key: &str, value: &Value) -> Result<String, String> {
    value
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{key}: expected a string, got {value}"))
}

/// A local directory for `name`: itself, or its snapshot in the Hugging Face cache.
fn local_dir(what: &str, name: &str) -> Result<String, String> {
    if Path::new(name).is_dir() {
        return Ok(name.to_owned());
    }
    hub_snapshot(name)
        .map(|dir: PathBuf| dir.to_string_lossy().into_owned())
        .ok_or_else(|| {
            format!(
                "{what} {name:?} is neither a local directory nor in the local Hugging Face \
                 cache; vrs-rs reads the tokenizer and chat template from disk: download it \
                 first (`hf download {name}`) or pass a directory"
            )
        })
}

/// Maps vLLM's args-json onto vrs's settings (engine `vllm`); the error names every key
/// vrs-rs cannot honour.
pub fn from_vllm_json(text: &str) -> Result<VllmFrontendArgs, String> {
    let map: Map<String, Value> = match serde_json::from_str(text) {
        Ok(Value::Object(map)) => map,
        Ok(other) => return Err(format!("--args-json: expected a JSON object, got {other}")),
        Err(e) => return Err(format!("invalid --args-json: {e}")),
    };
    let keys = serve_keys();
    let mut out = Map::new();
    let mut http = Map::new();
    let mut refused: Vec<String> = Vec::new();
    let mut problems: Vec<String> = Vec::new();
    let mut ready_timeout = None;
    out.insert("engine".into(), Value::from("vllm"));
    let model = map
        .get("model_tag")
        .or_else(|| map.get("model"))
        .ok_or("--args-json has neither model_tag nor model")?;
    let model = string("model_tag", model)?;
    out.insert("model".into(), Value::from(local_dir("model", &model)?));
    // vLLM serves the model under the name it was given (a hub id stays a hub id).
    out.insert("served_model_name".into(), Value::from(model));
    for (key, value) in &map {
        if value.is_null() || key == "model_tag" || key == "model" {
            continue;
        }
        let mapped: Result<(), String> = (|| {
            if let Some((vrs_key, in_http)) = direct(key) {
                let target = if in_http { &mut http } else { &mut out };
                target.insert(vrs_key.into(), value.clone());
                return Ok(());
            }
            match key.as_str() {
                "served_model_name" => {
                    out.insert(key.clone(), Value::from(one_string(key, value)?));
                }
                "api_key" => {
                    out.insert(key.clone(), Value::from(one_string(key, value)?));
                }
                "tokenizer" => {
                    let dir = local_dir("tokenizer", &string(key, value)?)?;
                    out.insert(key.clone(), Value::from(dir));
                }
                "chat_template" => {
                    let given = string(key, value)?;
                    let path = if Path::new(&given).is_file() {
                        given
                    } else {
                        inline_template(&given)?
                    };
                    out.insert(key.clone(), Value::from(path));
                }
                "reasoning_parser" => {
                    let name = string(key, value)?;
                    if !name.is_empty() {
                        out.insert(key.clone(), Value::from(name));
                    }
                }
                "sse_keep_alive_interval" => {
                    // vLLM's 0 means none; vrs's absent does.
                    if value.as_f64() != Some(0.0) {
                        out.insert(key.clone(), value.clone());
                    }
                }
                "collect_detailed_traces" => {
                    let any = match value {
                        Value::String(s) => !s.is_empty(),
                        Value::Array(items) => !items.is_empty(),
                        Value::Bool(b) => *b,
                        _ => return Err(format!("{key}: expected a list, got {value}")),
                    };
                    out.insert(key.clone(), Value::from(any));
                }
                "engine_ready_timeout_secs" => {
                    let secs = value
                        .as_f64()
                        .filter(|s| s.is_finite() && *s > 0.0)
                        .ok_or_else(|| format!("{key}: expected seconds > 0, got {value}"))?;
                    ready_timeout = Some(Duration::from_secs_f64(secs));
                }
                "tokenizer_mode" => {
                    let mode = string(key, value)?;
                    if !matches!(mode.as_str(), "auto" | "hf") {
                        refused.push(format!("{key} ({mode:?}; vrs-rs renders with HF's files)"));
                    }
                }
                k if NOOP_KEYS.contains(&k) => {}
                k if REFUSED_ENGINE_KEYS.contains(&k) => refused.push(k.to_owned()),
                k if keys.engine.iter().any(|e| e == k) => {}
                k if keys.frontend.iter().any(|f| f == k) => refused.push(k.to_owned()),
                k => refused.push(format!(
                    "{k} (not a vLLM {} serve argument)",
                    keys.vllm_version
                )),
            }
            Ok(())
        })();
        if let Err(e) = mapped {
            problems.push(e);
        }
    }
    if !out.contains_key("api_key") {
        // vLLM's Python frontend reads `VLLM_API_KEY` when `--api-key` is not given.
        if let Some(key) = std::env::var(VLLM_API_KEY_ENV)
            .ok()
            .filter(|k| !k.is_empty())
        {
            out.insert("api_key".into(), Value::from(key));
        }
    }
    if !refused.is_empty() {
        problems.push(format!(
            "vrs-rs cannot honour these vLLM serve arguments: {}; remove them (or serve \
             with vLLM's own frontend)",
            refused.join(", ")
        ));
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    out.insert("http".into(), Value::Object(http));
    let serve = ServeArgs::from_json(&Value::Object(out).to_string())?;
    Ok(VllmFrontendArgs {
        serve,
        ready_timeout,
    })
}

#[cfg(test)]
mod tests;
