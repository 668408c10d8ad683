//! Unit tests of `args.rs`.

use std::path::PathBuf;

use super::*;
use crate::dataset::FileKind;

#[test]
fn defaults_follow_vllm() {
    let args = BenchArgs::from_json(r#"{"base_url": "http://127.0.0.1:8000/"}"#).unwrap();
    assert_eq!(args.url(), "http://127.0.0.1:8000/v1/completions");
    assert_eq!(args.models_url(), "http://127.0.0.1:8000/v1/models");
    assert_eq!(args.num_prompts, 1000);
    assert_eq!(args.request_rate, None);
    assert_eq!(args.metric_percentiles, vec![99.0]);
    assert_eq!(args.percentile_metrics, Metric::ALL.to_vec());
    assert!(args.goodput.is_none());
}

#[test]
fn chat_backend_picks_its_endpoint_and_goodput_parses() {
    let args = BenchArgs::from_json(
        r#"{"base_url": "http://h:1", "backend": "openai-chat", "request_rate": 5.5,
            "percentile_metrics": ["ttft", "itl", "ttft"], "goodput": {"tpot": 50, "ttft": 500},
            "max_concurrency": 4, "label": "x"}"#,
    )
    .unwrap();
    assert_eq!(args.url(), "http://h:1/v1/chat/completions");
    assert_eq!(args.request_rate, Some(5.5));
    assert_eq!(args.percentile_metrics, vec![Metric::Ttft, Metric::Itl]);
    assert_eq!(
        args.goodput,
        Some(vec![(Metric::Ttft, 500.0), (Metric::Tpot, 50.0)])
    );
}

#[test]
fn responses_and_messages_pick_their_endpoints() {
    let url = |backend: &str| {
        let text = format!(r#"{{"base_url": "http://h:1", "backend": "{backend}"}}"#);
        let args = BenchArgs::from_json(&text).unwrap();
        assert_eq!(args.backend.name(), backend);
        args.url()
    };
    assert_eq!(url("openai-responses"), "http://h:1/v1/responses");
    assert_eq!(url("anthropic-messages"), "http://h:1/v1/messages");
    let custom = BenchArgs::from_json(
        r#"{"base_url": "http://h:1", "backend": "anthropic-messages", "endpoint": "/x"}"#,
    )
    .unwrap();
    assert_eq!(custom.url(), "http://h:1/x");
}

#[test]
fn embeddings_take_their_endpoint_and_report_e2el_only() {
    let args =
        BenchArgs::from_json(r#"{"base_url": "http://h:1", "backend": "openai-embeddings"}"#)
            .unwrap();
    assert!(args.backend.pooling());
    assert_eq!(args.url(), "http://h:1/v1/embeddings");
    assert_eq!(
        args.percentile_metrics,
        vec![Metric::E2el],
        "vLLM's pooling default"
    );
    let args = BenchArgs::from_json(
        r#"{"base_url": "http://h:1", "backend": "openai-embeddings", "endpoint": "/e",
            "percentile_metrics": ["e2el"], "goodput": {"e2el": 20}}"#,
    )
    .unwrap();
    assert_eq!(args.url(), "http://h:1/e");
    assert_eq!(args.goodput, Some(vec![(Metric::E2el, 20.0)]));
    // null (what `vrs bench serve` sends without --percentile-metrics): the backend's
    let generation =
        BenchArgs::from_json(r#"{"base_url": "http://h", "percentile_metrics": null}"#).unwrap();
    assert_eq!(generation.percentile_metrics, Metric::ALL.to_vec());
}

#[test]
fn errors_name_the_key() {
    let cases = [
        (r#"{"base_url": "https://"}"#, "https://HOST:PORT"),
        (
            r#"{"base_url": "http://h", "insecure": true}"#,
            "apply to https://",
        ),
        (
            r#"{"base_url": "http://h", "ca_cert": "/ca.pem"}"#,
            "apply to https://",
        ),
        (
            r#"{"base_url": "https://h", "insecure": true, "ca_cert": "/ca.pem"}"#,
            "not both",
        ),
        (r#"{"base_url": "h:80"}"#, "base_url"),
        (r#"{"base_url": "http://h", "endpoint": "v1"}"#, "endpoint"),
        (
            r#"{"base_url": "http://h", "dataset": "sharegpt"}"#,
            "the sharegpt dataset needs dataset_path",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "burstgpt", "dataset_path": "b.csv"}"#,
            "dataset must be one of random, sharegpt, custom, sonnet, prefix_repetition",
        ),
        (
            r#"{"base_url": "http://h", "dataset_path": "d.json"}"#,
            "dataset_path (d.json) is for the sharegpt, custom, sonnet and conversation",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "conversation", "backend": "openai-chat"}"#,
            "the conversation dataset needs dataset_path",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "conversation", "dataset_path": "c.json"}"#,
            "use --backend openai-chat (not openai-completions)",
        ),
        (
            r#"{"base_url": "http://h", "conversation_think_time": 2}"#,
            "conversation_think_time (--conversation-think-time) is for the conversation",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "conversation", "dataset_path": "c.json",
                "backend": "openai-chat", "conversation_think_time": -1}"#,
            "conversation_think_time must be a number of seconds >= 0",
        ),
        (
            r#"{"base_url": "http://h", "conversation_output_len": 5}"#,
            "conversation_output_len is for the conversation dataset, not random",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "sonnet"}"#,
            "the sonnet dataset needs dataset_path (--dataset-path FILE)",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "sonnet", "dataset_path": "s.txt",
                "sonnet_input_len": 100, "sonnet_prefix_len": 101}"#,
            "--sonnet-prefix-len (101) must not exceed --sonnet-input-len (100)",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "sonnet", "dataset_path": "s.txt",
                "sonnet_output_len": 0}"#,
            "sonnet_output_len (--sonnet-output-len) must be at least 1",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "sonnet", "dataset_path": "s.txt",
                "random_prefix_len": 4}"#,
            "random_prefix_len (--random-prefix-len) is for the random dataset",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "custom", "dataset_path": "c.jsonl",
                "custom_output_len": 0}"#,
            "custom_output_len must be at least 1, or -1",
        ),
        (
            r#"{"base_url": "http://h", "dataset": "custom", "dataset_path": "c.jsonl",
                "sharegpt_output_len": 5}"#,
            "sharegpt_output_len is for the sharegpt dataset",
        ),
        (
            r#"{"base_url": "http://h", "random_range_ratio": 1.0}"#,
            "random_range_ratio",
        ),
        (
            r#"{"base_url": "http://h", "num_prompts": 0}"#,
            "num_prompts",
        ),
        (
            r#"{"base_url": "http://h", "max_concurrency": 0}"#,
            "max_concurrency",
        ),
        (
            r#"{"base_url": "http://h", "request_rate": 0}"#,
            "request_rate",
        ),
        (
            r#"{"base_url": "http://h", "percentile_metrics": ["x"]}"#,
            "percentile_metrics",
        ),
        (
            r#"{"base_url": "http://h", "metric_percentiles": [101]}"#,
            "metric_percentiles",
        ),
        (
            r#"{"base_url": "http://h", "goodput": {"itl": 5}}"#,
            "goodput",
        ),
        (
            r#"{"base_url": "http://h", "goodput": {"ttft": -5}}"#,
            "goodput",
        ),
        (r#"{"base_url": "http://h", "bogus": 1}"#, "bogus"),
        (
            r#"{"base_url": "http://h", "backend": "openai-responses", "ignore_eos": true}"#,
            "ignore_eos: the OpenAI Responses API",
        ),
        (
            r#"{"base_url": "http://h", "backend": "anthropic-messages", "ignore_eos": true}"#,
            "ignore_eos: the Anthropic Messages API",
        ),
        (
            r#"{"base_url": "http://h", "backend": "openai-embeddings", "ignore_eos": true}"#,
            "ignore_eos: the OpenAI embeddings API",
        ),
        (
            r#"{"base_url": "http://h", "backend": "openai-embeddings",
                "percentile_metrics": ["e2el", "ttft"]}"#,
            "percentile_metrics: ttft is not measured with backend openai-embeddings",
        ),
        (
            r#"{"base_url": "http://h", "backend": "openai-embeddings",
                "goodput": {"tpot": 5}}"#,
            "goodput: tpot is not measured with backend openai-embeddings",
        ),
        (
            r#"{"base_url": "http://h", "backend": "vllm"}"#,
            "openai-embeddings",
        ),
        ("{", "invalid --args-json"),
    ];
    for (text, needle) in cases {
        let err = BenchArgs::from_json(text).unwrap_err();
        assert!(err.contains(needle), "{text}: {err}");
    }
}

#[test]
fn https_takes_the_system_store_a_ca_file_or_insecure() {
    let args = BenchArgs::from_json(r#"{"base_url": "https://h:8443/"}"#).unwrap();
    assert_eq!(args.base_url, "https://h:8443");
    assert!(args.https());
    assert_eq!(args.trust, ServerTrust::System);
    let args = BenchArgs::from_json(r#"{"base_url": "https://h", "insecure": true}"#).unwrap();
    assert_eq!(args.trust, ServerTrust::Insecure);
    let args = BenchArgs::from_json(r#"{"base_url": "https://h", "ca_cert": "/ca.pem"}"#).unwrap();
    assert_eq!(args.trust, ServerTrust::CaFile("/ca.pem".into()));
    let plain = BenchArgs::from_json(r#"{"base_url": "http://h"}"#).unwrap();
    assert!(!plain.https());
}

#[test]
fn datasets_take_vllms_keys() {
    let args = |extra: &str| {
        BenchArgs::from_json(&format!(r#"{{"base_url": "http://h:1", {extra}}}"#))
            .unwrap()
            .dataset
    };
    assert_eq!(args(r#""dataset": "random""#), DatasetChoice::Random);
    let full = |extra: &str| {
        BenchArgs::from_json(&format!(r#"{{"base_url": "http://h:1", {extra}}}"#)).unwrap()
    };
    assert_eq!(full(r#""dataset": "random""#).random_prefix_len, 0);
    assert_eq!(
        full(r#""dataset": "random", "random_prefix_len": 32"#).random_prefix_len,
        32
    );
    // vLLM's sonnet defaults: 550 in, 150 out, a 200-token prefix
    let sonnet = |path: &str, chat_template: bool, shape: [usize; 3]| DatasetChoice::Sonnet {
        path: PathBuf::from(path),
        shape: crate::dataset::SonnetShape {
            input_len: shape[0],
            output_len: shape[1],
            prefix_len: shape[2],
        },
        chat_template,
    };
    assert_eq!(
        args(r#""dataset": "sonnet", "dataset_path": "s.txt""#),
        sonnet("s.txt", true, [550, 150, 200])
    );
    assert_eq!(
        args(
            r#""dataset": "sonnet", "dataset_path": "s.txt", "sonnet_input_len": 64,
                "sonnet_output_len": 3, "sonnet_prefix_len": 64, "skip_chat_template": true"#
        ),
        sonnet("s.txt", false, [64, 3, 64])
    );
    assert_eq!(
        args(r#""dataset": "sharegpt", "dataset_path": "sg.json", "sharegpt_output_len": 9"#),
        DatasetChoice::File(
            FileKind::ShareGpt {
                output_len: Some(9)
            },
            PathBuf::from("sg.json")
        )
    );
    assert_eq!(
        args(r#""dataset": "prefix_repetition", "prefix_repetition_suffix_len": 8"#),
        DatasetChoice::PrefixRepetition {
            prefix_len: 256,
            suffix_len: 8,
            num_prefixes: 10,
            output_len: 128
        }
    );
    let custom = FileKind::Custom {
        output_len: Some(256),
        chat_template: true,
    };
    assert_eq!(
        args(r#""dataset": "custom", "dataset_path": "c.jsonl""#),
        DatasetChoice::File(custom, PathBuf::from("c.jsonl"))
    );
    let own = FileKind::Custom {
        output_len: None,
        chat_template: false,
    };
    assert_eq!(
        args(
            r#""dataset": "custom", "dataset_path": "c.jsonl", "custom_output_len": -1,
                "skip_chat_template": true"#
        ),
        DatasetChoice::File(own, PathBuf::from("c.jsonl"))
    );
    let chat = full(
        r#""dataset": "conversation", "dataset_path": "v.json", "backend": "openai-chat",
            "conversation_output_len": 12, "conversation_think_time": 0.5"#,
    );
    assert_eq!(
        chat.dataset,
        DatasetChoice::Conversation {
            path: PathBuf::from("v.json"),
            output_len: Some(12)
        }
    );
    assert_eq!(chat.think_time, 0.5);
    assert_eq!(chat.endpoint, "/v1/chat/completions");
}
