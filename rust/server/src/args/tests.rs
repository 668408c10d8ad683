//! `--args-json` documents of `vrs-rs serve`.

use super::*;

fn model_dir() -> String {
    std::env::temp_dir().to_string_lossy().into_owned()
}

#[test]
fn args_json_with_all_keys() {
    let text = serde_json::json!({
        "model": model_dir(), "served_model_name": "demo", "host": "127.0.0.1",
        "port": 8123, "log_level": "warning", "shutdown_timeout": 2.5,
        "python_executable": "/usr/bin/python3", "chat_template": null,
        "engine_config": {"model": "/m", "mock": true, "max_model_len": 64}
    })
    .to_string();
    let args = ServeArgs::from_json(&text).unwrap();
    assert_eq!(args.served_model_name(), "demo");
    assert_eq!(args.port(), 8123);
    assert_eq!(
        args.shutdown_timeout(),
        std::time::Duration::from_millis(2500)
    );
    assert_eq!(args.engine_config()["model"], "/m");
    assert_eq!(tracing_level(args.log_level()).unwrap(), "warn");
}

/// The `http` object and the serve-level edge keys, as `vrs serve` writes them.
#[test]
fn args_json_with_the_edge_keys() {
    let text = serde_json::json!({
        "model": model_dir(), "sse_keep_alive_interval": 0.5, "max_num_queued_reqs": 4,
        "max_num_queued_tokens": null, "max_queue_wait": 2.0,
        "otlp_traces_endpoint": "http://127.0.0.1:4318", "collect_detailed_traces": true,
        "http": {"ssl_keyfile": null, "ssl_certfile": null, "ssl_ca_certs": null,
                 "ssl_cert_reqs": 0, "uds": null, "allowed_origins": ["https://a.example"],
                 "allowed_methods": ["*"], "allowed_headers": ["*"],
                 "allow_credentials": true, "enable_request_id_headers": true,
                 "h11_max_incomplete_event_size": 65536, "header_read_timeout": 10.0,
                 "http_timeout_keep_alive": 5.0, "max_connections": 100}
    })
    .to_string();
    let args = ServeArgs::from_json(&text).unwrap();
    assert_eq!(
        args.sse_keep_alive_interval(),
        Some(std::time::Duration::from_millis(500))
    );
    assert_eq!(args.max_num_queued_reqs(), Some(4));
    assert_eq!(args.max_num_queued_tokens(), None);
    assert_eq!(
        args.max_queue_wait(),
        Some(std::time::Duration::from_secs(2))
    );
    assert_eq!(args.otlp_traces_endpoint(), Some("http://127.0.0.1:4318"));
    assert!(args.collect_detailed_traces());
    assert_eq!(args.http.allowed_origins, ["https://a.example"]);
    assert!(args.http.allow_credentials && args.http.enable_request_id_headers);
    assert_eq!(args.http.max_connections, Some(100));
    let wait = text.replace("\"max_queue_wait\":2.0", "\"max_queue_wait\":0.0");
    assert!(ServeArgs::from_json(&wait)
        .unwrap_err()
        .contains("max_queue_wait must be > 0"));
}

#[test]
fn args_json_nulls_take_defaults() {
    let text = format!(
        r#"{{"model": {:?}, "served_model_name": null, "host": null, "port": null,
            "log_level": null, "shutdown_timeout": null, "python_executable": null,
            "chat_template": null, "engine_config": null}}"#,
        model_dir()
    );
    let args = ServeArgs::from_json(&text).unwrap();
    assert_eq!(args.host(), DEFAULT_HOST);
    assert_eq!(args.port(), DEFAULT_PORT);
    assert_eq!(args.served_model_name(), model_dir());
    assert_eq!(args.python_executable(), DEFAULT_PYTHON);
    assert_eq!(args.engine_config()["model"], Value::String(model_dir()));
}

#[test]
fn args_json_errors_name_the_problem() {
    let err = ServeArgs::from_json("{").unwrap_err();
    assert!(err.starts_with("invalid --args-json"), "{err}");
    let unknown = format!(r#"{{"model": {:?}, "bogus": 1}}"#, model_dir());
    assert!(ServeArgs::from_json(&unknown)
        .unwrap_err()
        .contains("bogus"));
    let missing = ServeArgs::from_json(r#"{"model": "/definitely/not/here"}"#).unwrap_err();
    assert!(missing.contains("does not exist"), "{missing}");
    let level = format!(r#"{{"model": {:?}, "log_level": "loud"}}"#, model_dir());
    assert!(ServeArgs::from_json(&level)
        .unwrap_err()
        .contains("log_level"));
    let timeout = format!(r#"{{"model": {:?}, "shutdown_timeout": -1}}"#, model_dir());
    assert!(ServeArgs::from_json(&timeout)
        .unwrap_err()
        .contains("shutdown_timeout"));
    for (key, value, words) in [
        ("request_timeout", "0", "request_timeout"),
        ("max_request_body", "0", "max_request_body"),
        ("max_concurrent_requests", "0", "max_concurrent_requests"),
        ("max_batch_prompts", "0", "max_batch_prompts"),
        ("tool_call_parser", "\"xml\"", "demo"),
        ("reasoning_parser", "\"o1\"", "deepseek_r1"),
        ("otlp_traces_endpoint", "\"c:4318\"", "https://"),
        (
            "otlp_traces_endpoint",
            "\"grpc://c:4317\"",
            "--otlp-traces-endpoint",
        ),
        (
            "chat_template_content_format",
            "\"list\"",
            "auto, string, openai",
        ),
    ] {
        let text = format!(r#"{{"model": {:?}, "{key}": {value}}}"#, model_dir());
        let err = ServeArgs::from_json(&text).unwrap_err();
        assert!(err.contains(words), "{key}: {err}");
    }
    let ok = format!(
        r#"{{"model": {:?}, "api_key": "k", "max_request_body": 10,
            "max_concurrent_requests": 2, "request_timeout": 1.5, "max_batch_prompts": 3,
            "tool_call_parser": "auto", "reasoning_parser": "qwen3"}}"#,
        model_dir()
    );
    let args = ServeArgs::from_json(&ok).unwrap();
    assert_eq!(args.api_key().as_deref(), Some("k"));
    assert_eq!(args.max_request_body(), 10);
    assert_eq!(args.specific.max_batch_prompts, Some(3));
    assert_eq!(
        args.request_timeout(),
        Some(std::time::Duration::from_millis(1500))
    );
    let port = format!(r#"{{"model": {:?}, "port": 70000}}"#, model_dir());
    assert!(ServeArgs::from_json(&port).is_err());
}

#[test]
fn tokenizer_key_names_the_tokenizer_dir() {
    let plain = format!(r#"{{"model": {:?}, "tokenizer": null}}"#, model_dir());
    assert_eq!(
        ServeArgs::from_json(&plain).unwrap().tokenizer_dir(),
        model_dir()
    );
    let own = std::env::current_dir().unwrap();
    let text = format!(
        r#"{{"model": {:?}, "tokenizer": {:?}}}"#,
        model_dir(),
        own.to_string_lossy()
    );
    let args = ServeArgs::from_json(&text).unwrap();
    assert_eq!(args.tokenizer_dir(), own.to_string_lossy());
    let missing = format!(
        r#"{{"model": {:?}, "tokenizer": "/no/such/tokenizer"}}"#,
        model_dir()
    );
    let err = ServeArgs::from_json(&missing).unwrap_err();
    assert!(err.contains("tokenizer directory"), "{err}");
    let render = format!(
        r#"{{"model": {:?}, "tokenizer": "/no/such/tokenizer"}}"#,
        model_dir()
    );
    assert!(RenderArgs::from_json(&render).is_err());
}

/// As the Python services and the schema: an array is no `http` object (serde's derive
/// alone would read it as the fields in order).
#[test]
fn the_http_object_is_an_object_only() {
    let text = format!(r#"{{"model": {:?}, "http": ["/a.pem"]}}"#, model_dir());
    let err = ServeArgs::from_json(&text).unwrap_err();
    assert!(err.contains("expected the http object"), "{err}");
}

mod schema;

fn vllm_args(extra: serde_json::Value) -> Result<ServeArgs, String> {
    let mut doc = serde_json::json!({"model": model_dir(), "engine": "vllm"});
    if let (Value::Object(doc), Value::Object(extra)) = (&mut doc, extra) {
        doc.extend(extra);
    }
    ServeArgs::from_json(&doc.to_string())
}

#[test]
fn engine_vllm_runs_vllms_headless_engine_as_vllm_rs_does() {
    let args = vllm_args(serde_json::json!({
        "vllm_python": "/venv/bin/python", "data_parallel_size": 2,
        "vllm_engine_args": ["--tensor-parallel-size", "2"],
    }))
    .unwrap();
    assert_eq!(args.engine_kind(), EngineKind::Vllm);
    let handshake = engine::VllmHandshake {
        host: "127.0.0.1".into(),
        port: 41000,
    };
    let argv = args.vllm_engine_argv(&handshake).join(" ");
    assert_eq!(
        argv,
        format!(
            "/venv/bin/python -m vllm.entrypoints.cli.main serve {} --headless \
             --data-parallel-address 127.0.0.1 --data-parallel-rpc-port 41000 \
             --data-parallel-size 2 --tensor-parallel-size 2",
            model_dir()
        )
    );
    let mixed = vllm_args(serde_json::json!({
        "data_parallel_size": 3, "data_parallel_size_local": 1,
        "vllm_engine_command": ["mock-engine", "--step-ms", "2"],
    }))
    .unwrap();
    assert_eq!(
        mixed.vllm_engine_argv(&handshake).join(" "),
        "mock-engine --step-ms 2 --data-parallel-address 127.0.0.1 \
         --data-parallel-rpc-port 41000 --data-parallel-size 3 --data-parallel-size-local 1"
    );
    assert!(mixed.vllm_engine_replaced() && !args.vllm_engine_replaced());
    assert_eq!(
        vllm_args(serde_json::json!({})).unwrap().vllm_python(),
        "python3"
    );
}

#[test]
fn engine_settings_are_checked() {
    let bad = vllm_args(serde_json::json!({"engine": "sglang"})).unwrap_err();
    assert!(
        bad.contains("engine must be one of vrs, vllm; got \"sglang\""),
        "{bad}"
    );
    let stray = vllm_args(serde_json::json!({"engine": null, "vllm_python": "py"})).unwrap_err();
    assert!(
        stray.contains("vllm_python applies to vLLM's engine only"),
        "{stray}"
    );
    let empty = vllm_args(serde_json::json!({"vllm_engine_command": []})).unwrap_err();
    assert!(
        empty.contains("vllm_engine_command must name a program"),
        "{empty}"
    );
    let vrs = ServeArgs::from_json(&serde_json::json!({"model": model_dir()}).to_string());
    assert_eq!(vrs.unwrap().engine_kind(), EngineKind::Vrs);
}
