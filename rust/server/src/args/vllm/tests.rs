use serde_json::{json, Value};

use super::*;
use crate::args::EngineKind;

fn model_dir() -> String {
    std::env::temp_dir().to_string_lossy().into_owned()
}

fn parse(extra: Value) -> Result<VllmFrontendArgs, String> {
    let mut doc = json!({"model_tag": model_dir(), "http_timeout_keep_alive": 5,
                         "engine_ready_timeout_secs": 600});
    if let (Value::Object(doc), Value::Object(extra)) = (&mut doc, extra) {
        doc.extend(extra);
    }
    from_vllm_json(&doc.to_string())
}

#[test]
fn vllm_frontend_keys_map_onto_vrs_settings() {
    let args = parse(json!({
        "allowed_origins": ["https://a.example"], "allow_credentials": true,
        "api_key": ["k1"], "enable_auto_tool_choice": true, "enable_log_requests": true,
        "host": "0.0.0.0", "port": 9000, "max_num_queued_reqs": 5,
        "reasoning_parser": "qwen3", "served_model_name": ["a"],
        "tool_call_parser": "hermes", "uvicorn_log_level": "warning",
        "sse_keep_alive_interval": 0, "scheduling_policy": "priority",
        "http_timeout_keep_alive": 7, "collect_detailed_traces": ["all"],
        "otlp_traces_endpoint": "http://127.0.0.1:4318",
    }))
    .unwrap();
    let serve = &args.serve;
    assert_eq!(serve.engine_kind(), EngineKind::Vllm);
    assert_eq!(serve.model, model_dir());
    assert_eq!(serve.served_model_name(), "a");
    assert_eq!((serve.host(), serve.port()), ("0.0.0.0", 9000));
    assert_eq!(serve.api_key().as_deref(), Some("k1"));
    assert_eq!(serve.specific.tool_call_parser.as_deref(), Some("hermes"));
    assert_eq!(serve.specific.reasoning_parser.as_deref(), Some("qwen3"));
    assert_eq!(serve.max_num_queued_reqs(), Some(5));
    assert_eq!(serve.sse_keep_alive_interval(), None);
    assert_eq!(serve.scheduling_policy(), "priority");
    assert!(serve.collect_detailed_traces());
    assert_eq!(serve.http.allowed_origins, ["https://a.example"]);
    assert!(serve.http.allow_credentials);
    assert_eq!(serve.http.http_timeout_keep_alive, 7.0);
    assert_eq!(args.ready_timeout, Some(Duration::from_secs(600)));
}

#[test]
fn the_model_is_served_under_the_name_vllm_was_given() {
    let args = parse(json!({})).unwrap();
    assert_eq!(args.serve.served_model_name(), model_dir());
    let hub = std::env::temp_dir().join(format!("vrs-hub-{}", std::process::id()));
    let repo = hub.join("models--acme--tiny");
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::create_dir_all(repo.join("snapshots/abc123")).unwrap();
    std::fs::write(repo.join("refs/main"), "abc123\n").unwrap();
    assert_eq!(
        super::super::vllm_keys::hub_snapshot_in(&hub, "acme/tiny"),
        Some(repo.join("snapshots/abc123"))
    );
    assert_eq!(
        super::super::vllm_keys::hub_snapshot_in(&hub, "acme/other"),
        None
    );
    assert_eq!(super::super::vllm_keys::hub_snapshot_in(&hub, "../x"), None);
    std::fs::remove_dir_all(&hub).unwrap();
}

#[test]
fn engine_keys_are_accepted_silently() {
    let args = parse(json!({
        "tensor_parallel_size": 2, "gpu_memory_utilization": 0.8, "dtype": "bfloat16",
        "max_model_len": 256, "data_parallel_size": 2, "data_parallel_size_local": 0,
        "data_parallel_address": "10.0.0.1", "data_parallel_rpc_port": 5555,
        "enable_prefix_caching": false, "trust_remote_code": true, "tokenizer_mode": "auto",
    }))
    .unwrap();
    assert_eq!(args.serve.specific.engine_config, None);
    assert_eq!(
        args.serve.data_parallel_size(),
        1,
        "the flags give the engine counts"
    );
}

#[test]
fn frontend_keys_vrs_cannot_honour_are_refused_by_name() {
    let err = parse(json!({
        "lora_modules": ["a=/x"], "response_role": "bot", "grpc_port": 50051,
        "tensor_parallel_size": 2, "skip_tokenizer_init": true, "tokenizer_mode": "mistral",
    }))
    .unwrap_err();
    for key in [
        "lora_modules",
        "response_role",
        "grpc_port",
        "skip_tokenizer_init",
    ] {
        assert!(err.contains(key), "{key} not named: {err}");
    }
    assert!(err.contains("tokenizer_mode (\"mistral\""), "{err}");
    assert!(!err.contains("tensor_parallel_size"), "{err}");
    assert!(err.contains("remove them"), "{err}");
}

#[test]
fn unknown_keys_and_bad_values_are_refused() {
    let err = parse(json!({"no_such_flag": 1})).unwrap_err();
    assert!(
        err.contains("no_such_flag (not a vLLM 0.33.0 serve argument)"),
        "{err}"
    );
    let err = parse(json!({"served_model_name": ["a", "b"]})).unwrap_err();
    assert!(
        err.contains("served_model_name: vrs-rs takes one value, got 2"),
        "{err}"
    );
    let err = parse(json!({"engine_ready_timeout_secs": -1})).unwrap_err();
    assert!(err.contains("engine_ready_timeout_secs"), "{err}");
    let err = from_vllm_json(r#"{"port": 1}"#).unwrap_err();
    assert!(err.contains("neither model_tag nor model"), "{err}");
    let err = from_vllm_json(r#"{"model_tag": "/no/such/dir/x"}"#).unwrap_err();
    assert!(err.contains("neither a local directory nor in the local Hugging Face cache"));
    // vrs's own checks still apply to mapped values.
    let err = parse(json!({"tool_call_parser": "nope"})).unwrap_err();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn an_inline_chat_template_is_written_to_a_file() {
    let args = parse(json!({"chat_template": "{{ messages[0].content }}"})).unwrap();
    let path = args.serve.chat_template.clone().unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{{ messages[0].content }}"
    );
    let err = parse(json!({"chat_template": "/no/such/template.jinja"})).unwrap_err();
    assert!(err.contains("neither a file nor a Jinja template"), "{err}");
}

#[test]
fn every_key_vrs_rs_handles_is_a_vllm_serve_key() {
    let keys = serve_keys();
    assert_eq!(keys.vllm_version, "0.33.0");
    let known = |k: &str| keys.engine.iter().chain(&keys.frontend).any(|x| x == k);
    let mapped = [
        "host",
        "port",
        "chat_template_content_format",
        "tool_call_parser",
        "api_key",
        "scheduling_policy",
        "shutdown_timeout",
        "max_num_queued_reqs",
        "allowed_origins",
        "max_num_queued_tokens",
        "otlp_traces_endpoint",
        "enable_tokenizer_info_endpoint",
        "allowed_methods",
        "allowed_headers",
        "allow_credentials",
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_ca_certs",
        "ssl_cert_reqs",
        "enable_request_id_headers",
        "h11_max_incomplete_event_size",
        "http_timeout_keep_alive",
        "served_model_name",
        "tokenizer",
        "chat_template",
        "reasoning_parser",
        "sse_keep_alive_interval",
        "collect_detailed_traces",
        "engine_ready_timeout_secs",
        "tokenizer_mode",
        "model_tag",
        "model",
    ];
    for key in mapped.iter().chain(NOOP_KEYS).chain(REFUSED_ENGINE_KEYS) {
        assert!(known(key), "{key} is not a vLLM 0.33.0 serve key");
    }
    for key in REFUSED_ENGINE_KEYS {
        assert!(
            keys.engine.iter().any(|k| k == key),
            "{key} is not an engine key"
        );
    }
}

#[test]
fn vllm_json_is_told_by_model_tag() {
    assert!(is_vllm_json(r#"{"model_tag": "m"}"#));
    assert!(!is_vllm_json(r#"{"model": "m"}"#));
    assert!(!is_vllm_json("not json"));
}
