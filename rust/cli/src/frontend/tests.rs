//! `vrs-rs frontend`: the two contracts, the logged command line.

use super::*;

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn shorten_elides_the_args_json_only() {
    let argv = strings(&[
        "vrs-rs",
        "frontend",
        "--listen-fd",
        "3",
        "--args-json",
        r#"{"model": "m"}"#,
    ]);
    assert_eq!(
        shorten(&argv).join(" "),
        "vrs-rs frontend --listen-fd 3 --args-json '{...}'"
    );
    let joined = strings(&["vrs-rs", r#"--args-json={"a": 1}"#]);
    assert_eq!(shorten(&joined).join(" "), "vrs-rs --args-json='{...}'");
}

#[test]
fn redact_hides_keys_and_tokens_only() {
    let argv = strings(&[
        "vrs-rs",
        "frontend",
        "--listen-fd",
        "3",
        "--api-key",
        "sk-1",
        "--token=t0",
        "--args-json",
        r#"{"model":"/m","api_key":"sk-2","engine_config":{"hf_token":"t1","max_num_batched_tokens":8}}"#,
    ]);
    let out = redact(&argv).join(" ");
    for secret in ["sk-1", "sk-2", "t0", "t1"] {
        assert!(!out.contains(secret), "{secret} leaked: {out}");
    }
    assert!(out.contains("--listen-fd 3") && out.contains("--api-key ***"));
    assert!(out.contains("--token=***") && out.contains("\"max_num_batched_tokens\":8"));
    let inline = redact(&strings(&["--args-json={\"api_key\":\"sk-3\"}"]));
    assert_eq!(inline, ["--args-json={\"api_key\":\"***\"}"]);
}

fn cli(count: u16, start: u16, dp: Option<u16>) -> FrontendCli {
    FrontendCli {
        listen_fd: 3,
        input_listener_fd: 4,
        output_listener_fd: 5,
        input_address: Some("ipc:///x".into()),
        output_address: Some("ipc:///y".into()),
        engine_start_index: start,
        engine_count: count,
        data_parallel_size: dp,
        coordinator_address: None,
        grpc_listen_fd: None,
        args_json: format!(
            r#"{{"model": {:?}}}"#,
            std::env::temp_dir().to_string_lossy()
        ),
    }
}

/// vLLM's contract: no addresses, vLLM's args-json.
fn vllm_cli(args_json: &str) -> FrontendCli {
    FrontendCli {
        input_address: None,
        output_address: None,
        args_json: args_json.to_owned(),
        ..cli(1, 0, Some(1))
    }
}

fn vllm_json(extra: &str) -> String {
    format!(
        r#"{{"model_tag": {:?}, "http_timeout_keep_alive": 5, "engine_ready_timeout_secs": 30{extra}}}"#,
        std::env::temp_dir().to_string_lossy()
    )
}

#[test]
fn engine_counts_are_checked() {
    assert!(cli(1, 0, None).contract().is_ok());
    let err = |c: FrontendCli| c.contract().unwrap_err();
    assert!(err(cli(0, 0, None)).contains("at least 1"));
    assert!(err(cli(1, 2, Some(2))).contains("do not fit"));
    assert!(cli(2, 0, Some(2)).contract().is_ok());
    assert!(err(cli(3, 0, Some(2))).contains("do not fit"));
    assert!(cli(1, 1, Some(2)).contract().is_ok());
}

#[test]
fn vllms_contract_is_told_by_the_missing_addresses() {
    let contract = vllm_cli(&vllm_json(r#", "tensor_parallel_size": 2, "port": 9000"#))
        .contract()
        .unwrap();
    match contract {
        Contract::Vllm(sockets, args) => {
            assert_eq!((sockets.listen_fd, sockets.engine_count), (3, 1));
            assert_eq!(args.serve.port(), 9000);
            assert_eq!(args.ready_timeout, Some(std::time::Duration::from_secs(30)));
        }
        Contract::Vrs(..) => panic!("vLLM's argv taken for vrs's"),
    }
    assert!(matches!(cli(1, 0, None).contract(), Ok(Contract::Vrs(..))));
}

#[test]
fn vllms_contract_refuses_what_vrs_rs_cannot_honour() {
    let refused = vllm_cli(&vllm_json(r#", "lora_modules": ["a=/x"]"#))
        .contract()
        .unwrap_err();
    assert!(refused.contains("lora_modules"), "{refused}");
    let coordinator = FrontendCli {
        coordinator_address: Some("tcp://127.0.0.1:5000".into()),
        ..vllm_cli(&vllm_json(""))
    };
    match coordinator.contract() {
        Ok(Contract::Vllm(sockets, _)) => assert_eq!(
            sockets.coordinator_address.as_deref(),
            Some("tcp://127.0.0.1:5000"),
            "vLLM's coordinator is followed, not refused"
        ),
        other => panic!("expected vLLM's contract, got {other:?}"),
    }
    let grpc = FrontendCli {
        grpc_listen_fd: Some(9),
        ..vllm_cli(&vllm_json(""))
    };
    assert!(grpc.contract().unwrap_err().contains("--grpc-listen-fd"));
    let vrs_json = vllm_cli(&cli(1, 0, None).args_json).contract().unwrap_err();
    assert!(vrs_json.contains("has no model_tag"), "{vrs_json}");
    let half = FrontendCli {
        output_address: None,
        ..cli(1, 0, None)
    };
    assert!(half
        .contract()
        .unwrap_err()
        .contains("both --input-address"));
}
