//! The vLLM `serve` keys vrs-rs treats specially ([`super::vllm`]), and the two look-ups
//! the mapping needs: a hub id's snapshot in the Hugging Face cache and an inline chat
//! template written to a file.

use std::path::PathBuf;

/// Frontend keys without effect on what a client sees: log and docs switches, and keys
/// vLLM's supervisor has already acted on (the sockets, the API-server count).
pub const NOOP_KEYS: &[&str] = &[
    "api_server_count",
    "config",
    "data_parallel_supervisor_port",
    "disable_access_log_for_endpoints",
    "disable_fastapi_docs",
    "disable_uvicorn_access_log",
    "dp_supervisor_probe_failure_threshold",
    "dp_supervisor_probe_interval_s",
    "dp_supervisor_probe_timeout_s",
    // vrs-rs always lets `tool_choice: "auto"` through its tool-call parser.
    "enable_auto_tool_choice",
    "enable_log_deltas",
    "enable_log_outputs",
    "enable_offline_docs",
    "enable_server_load_tracking",
    "headless",
    "log_error_stack",
    "max_log_len",
    "uds",
    "uvicorn_log_level",
];

/// Engine keys that change what the frontend must do, in ways vrs-rs does not.
pub const REFUSED_ENGINE_KEYS: &[&str] = &[
    "io_processor_plugin",
    "reasoning_parser_plugin",
    "skip_tokenizer_init",
    "tokens_only",
];

/// The Hugging Face cache's hub directory (`HF_HUB_CACHE`, `HF_HOME/hub`, else
/// `~/.cache/huggingface/hub`).
fn hub_cache() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("HF_HUB_CACHE") {
        return Some(PathBuf::from(dir));
    }
    if let Some(home) = std::env::var_os("HF_HOME") {
        return Some(PathBuf::from(home).join("hub"));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface/hub"))
}

/// The cached snapshot of hub model `name` (`ORG/NAME`) at its `main` ref, if present.
pub fn hub_snapshot(name: &str) -> Option<PathBuf> {
    hub_snapshot_in(&hub_cache()?, name)
}

/// [`hub_snapshot`] in the hub cache directory `hub`.
pub fn hub_snapshot_in(hub: &std::path::Path, name: &str) -> Option<PathBuf> {
    let parts: Vec<&str> = name.split('/').collect();
    if parts.is_empty()
        || parts.len() > 2
        || parts.iter().any(|p| p.is_empty() || p.starts_with('.'))
    {
        return None;
    }
    let repo = hub.join(format!("models--{}", parts.join("--")));
    let revision = std::fs::read_to_string(repo.join("refs/main")).ok()?;
    let dir = repo.join("snapshots").join(revision.trim());
    dir.is_dir().then_some(dir)
}

/// vLLM takes `--chat-template` as a file or as the template itself; vrs-rs reads a
/// file, so an inline template is written to one (in the temporary directory).
pub fn inline_template(text: &str) -> Result<String, String> {
    if !(text.contains("{{") || text.contains("{%")) {
        return Err(format!(
            "chat_template {text:?} is neither a file nor a Jinja template"
        ));
    }
    let path =
        std::env::temp_dir().join(format!("vrs-rs-chat-template-{}.jinja", std::process::id()));
    std::fs::write(&path, text)
        .map_err(|e| format!("chat_template: cannot write {}: {e}", path.display()))?;
    Ok(path.to_string_lossy().into_owned())
}
