//! The standalone flags of `vrs-rs serve` and `vrs-rs render`.

use super::*;
use clap::Parser;

#[derive(Parser)]
struct Wrapper {
    #[command(flatten)]
    serve: ServeCli,
}

fn model_dir() -> String {
    std::env::temp_dir().to_string_lossy().into_owned()
}

#[test]
fn standalone_flags_build_the_engine_config() {
    let dir = model_dir();
    let w = Wrapper::try_parse_from([
        "x",
        &dir,
        "--mock",
        "--max-model-len",
        "128",
        "--port",
        "0",
        "--engine-config",
        r#"{"seed": 3}"#,
    ])
    .unwrap();
    let args = serve_args(w.serve).unwrap();
    let config = args.engine_config();
    assert_eq!(config["mock"], true);
    assert_eq!(config["max_model_len"], 128);
    assert_eq!(config["seed"], 3);
    assert_eq!(config["model"], Value::String(dir));
    assert_eq!(args.port(), 0);
}

#[test]
fn args_json_conflicts_with_flags() {
    let r = Wrapper::try_parse_from(["x", "--args-json", "{}", "--port", "1"]);
    assert!(r.is_err());
    assert!(
        Wrapper::try_parse_from(["x"]).is_err(),
        "MODEL or --args-json is required"
    );
    let bad = Wrapper::try_parse_from(["x", "/tmp", "--engine-config", "[1]"]).unwrap();
    assert!(serve_args(bad.serve).unwrap_err().contains("JSON object"));
}

#[test]
fn engine_vllm_flags_reach_the_engine_command() {
    use vrs_server::args::engine::VllmHandshake;
    use vrs_server::args::EngineKind;
    let dir = model_dir();
    let w = Wrapper::try_parse_from([
        "x",
        &dir,
        "--engine",
        "vllm",
        "--vllm-python",
        "/venv/bin/python",
        "--max-model-len",
        "256",
        "--vllm-engine-command",
        "'/path with space/python' mock.py --step-ms 2",
        "--",
        "--tensor-parallel-size",
        "2",
    ])
    .unwrap();
    let args = serve_args(w.serve).unwrap();
    assert_eq!(args.engine_kind(), EngineKind::Vllm);
    assert_eq!(args.vllm_python(), "/venv/bin/python");
    assert_eq!(args.specific.engine_config, None);
    let handshake = VllmHandshake {
        host: "127.0.0.1".into(),
        port: 5555,
    };
    assert_eq!(
        args.vllm_engine_argv(&handshake),
        [
            "/path with space/python",
            "mock.py",
            "--step-ms",
            "2",
            "--data-parallel-address",
            "127.0.0.1",
            "--data-parallel-rpc-port",
            "5555",
            "--data-parallel-size",
            "1",
            "--max-model-len",
            "256",
            "--tensor-parallel-size",
            "2",
        ]
    );
}

#[test]
fn engine_vllm_refuses_vrs_engine_flags_and_bad_commands() {
    let dir = model_dir();
    let parse = |extra: &[&str]| {
        let mut argv = vec!["x", dir.as_str(), "--engine", "vllm"];
        argv.extend(extra);
        serve_args(Wrapper::try_parse_from(argv).unwrap().serve)
    };
    let err = parse(&["--mock"]).unwrap_err();
    assert!(err.contains("--mock is for vrs's engine"), "{err}");
    let err = parse(&["--engine-config", "{}"]).unwrap_err();
    assert!(err.contains("--engine-config is for vrs's engine"), "{err}");
    let err = parse(&["--vllm-engine-command", "'unbalanced"]).unwrap_err();
    assert!(err.contains("quotes balanced"), "{err}");
    let err = serve_args(
        Wrapper::try_parse_from(["x", &dir, "--engine", "tgi"])
            .unwrap()
            .serve,
    )
    .unwrap_err();
    assert!(err.contains("engine must be one of vrs, vllm"), "{err}");
    let stray = Wrapper::try_parse_from(["x", &dir, "--vllm-python", "py"]).unwrap();
    let err = serve_args(stray.serve).unwrap_err();
    assert!(err.contains("add engine \"vllm\""), "{err}");
}

#[derive(Parser)]
struct RenderWrapper {
    #[command(flatten)]
    render: RenderCli,
}

fn dir() -> String {
    std::env::temp_dir().to_string_lossy().into_owned()
}

#[test]
fn args_json_and_flags_agree() {
    let json = serde_json::json!({"model": dir(), "served_model_name": "demo",
        "host": "127.0.0.1", "port": 0, "log_level": "debug", "chat_template": null,
        "chat_template_content_format": "openai", "max_model_len": 512});
    let from_json = RenderArgs::from_json(&json.to_string()).unwrap();
    let d = dir();
    let w = RenderWrapper::try_parse_from([
        "x",
        &d,
        "--served-model-name",
        "demo",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--log-level",
        "debug",
        "--max-model-len",
        "512",
        "--chat-template-content-format",
        "openai",
    ])
    .unwrap();
    assert_eq!(render_args(w.render).unwrap(), from_json);
    assert_eq!(from_json.served_model_name(), "demo");
    assert_eq!(from_json.port(), 0);
}

#[test]
fn bad_settings_name_the_problem() {
    let err = |v: serde_json::Value| RenderArgs::from_json(&v.to_string()).unwrap_err();
    assert!(err(serde_json::json!({"model": "/no/such/dir"})).contains("does not exist"));
    assert!(
        err(serde_json::json!({"model": dir(), "engine_config": {}})).contains("engine_config")
    );
    assert!(err(serde_json::json!({"model": dir(), "max_model_len": 0})).contains("max_model_len"));
    assert!(
        err(serde_json::json!({"model": dir(), "chat_template": "/no/such.jinja"}))
            .contains("chat template")
    );
    assert!(RenderWrapper::try_parse_from(["x", "--args-json", "{}", "--port", "1"]).is_err());
    let format = err(serde_json::json!({"model": dir(), "chat_template_content_format": "list"}));
    assert!(format.contains("auto, string, openai"), "{format}");
    let both = [
        "x",
        "--args-json",
        "{}",
        "--chat-template-content-format",
        "string",
    ];
    assert!(RenderWrapper::try_parse_from(both).is_err());
    assert!(Wrapper::try_parse_from(both).is_err());
}

#[test]
fn tokenizer_flag_and_key_agree() {
    let dir = model_dir();
    let w = Wrapper::try_parse_from(["x", &dir, "--tokenizer", &dir]).unwrap();
    assert_eq!(serve_args(w.serve).unwrap().tokenizer_dir(), dir);
    let r = RenderWrapper::try_parse_from(["x", &dir, "--tokenizer", "/no/such/dir"]).unwrap();
    assert!(render_args(r.render)
        .unwrap_err()
        .contains("tokenizer directory"));
    let both = Wrapper::try_parse_from(["x", "--args-json", "{}", "--tokenizer", &dir]);
    assert!(both.is_err(), "--args-json conflicts with --tokenizer");
}

const SCHEMA: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../server/contracts/args.schema.json"
));

/// The keys `--args-json`'s help lists, against `$defs.<name>.properties` of the schema
/// generated from `server/args_json.py`: every key is listed, and every snake_case word of
/// the help is a key.
fn check_args_json_help(command: clap::Command, name: &str) {
    let schema: Value = serde_json::from_str(SCHEMA).expect("args.schema.json parses");
    let keys: std::collections::BTreeSet<&str> = schema["$defs"][name]["properties"]
        .as_object()
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert!(!keys.is_empty(), "args.schema.json has no {name} keys");
    let arg = command
        .get_arguments()
        .find(|a| a.get_id() == "args_json")
        .expect("--args-json");
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(ToString::to_string)
        .unwrap_or_default();
    let words: std::collections::BTreeSet<&str> = help
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let missing: Vec<_> = keys.difference(&words).collect();
    let unknown: Vec<_> = words
        .iter()
        .filter(|w| w.contains('_') && !keys.contains(*w))
        .collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "--args-json help of {name}: keys not listed {missing:?}, listed but not keys \
         {unknown:?} (server/contracts/args.schema.json)"
    );
}

#[test]
fn args_json_help_lists_the_schema_keys() {
    use clap::CommandFactory;

    check_args_json_help(Wrapper::command(), "ServeArgs");
    check_args_json_help(RenderWrapper::command(), "RenderArgs");
}
