//! Byte-level compatibility with `engine/protocol.py` (docs/internals.md "The wire";
//! issue 2 item 3).
//!
//! 1. `tests/wire/make_fixtures.py` (which imports `engine.protocol` itself) writes one
//!    msgpack fixture per case; each must decode into its Rust type, equal the value built
//!    natively below, and re-encode to identical bytes.
//! 2. The same values built natively here are encoded and handed to
//!    `tests/wire/check_rust_encoded.py`, which decodes them with the strict msgspec
//!    decoders and requires equal values and identical re-encoded bytes.
//!
//! The case list here and in `tests/wire/wire_cases.py` must match name for name.
//! Python is `$VRS_PYTHON` or `python3`.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::process::Command;

use rmpv::Value;
use serde::de::DeserializeOwned;
use serde::Serialize;
use vrs_wire::*;

type Check = Box<dyn Fn(&[u8], bool) -> Result<(), String>>;

struct Case {
    type_name: &'static str,
    native: Vec<u8>,
    check: Check,
}

fn case<T>(value: T) -> Case
where
    T: Serialize + DeserializeOwned + PartialEq + Debug + 'static,
{
    let native = encode(&value).expect("native encode");
    let type_name = std::any::type_name::<T>()
        .rsplit("::")
        .next()
        .unwrap_or("?");
    let check = move |bytes: &[u8], canonical: bool| -> Result<(), String> {
        let decoded: T = decode(bytes).map_err(|e| format!("rust cannot decode: {e}"))?;
        if decoded != value {
            return Err(format!("decoded {decoded:?}\n  expected {value:?}"));
        }
        let again = encode(&decoded).map_err(|e| e.to_string())?;
        if canonical && again != bytes {
            return Err(format!(
                "re-encoding differs\n  python {}\n  rust   {}",
                hex(bytes),
                hex(&again)
            ));
        }
        Ok(())
    };
    Case {
        type_name,
        native,
        check: Box::new(check),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn map(entries: Vec<(&str, Value)>) -> Value {
    Value::Map(
        entries
            .into_iter()
            .map(|(k, v)| (Value::from(k), v))
            .collect(),
    )
}

/// A rank's memory: weights past 4 GiB (a u64 on the wire), KV bytes that differ by rank.
fn rank_memory(rank: u32, device: &str) -> RankMemory {
    RankMemory {
        rank,
        device: device.into(),
        weight_bytes: 8_053_063_680 + u64::from(rank),
        kv_cache_bytes: (1 << 40) - u64::from(rank),
    }
}

fn logprobs() -> Vec<TokenLogprobs> {
    vec![
        TokenLogprobs {
            token_id: 128_000,
            logprob: -0.125,
            rank: 1,
            top_token_ids: vec![128_000, 7, 0],
            top_logprobs: vec![-0.125, -2.5, -1e-300],
        },
        TokenLogprobs {
            token_id: 3,
            logprob: -17.75,
            rank: 42,
            top_token_ids: vec![],
            top_logprobs: vec![],
        },
    ]
}

fn full_sampling() -> SamplingParams {
    SamplingParams {
        max_tokens: 4_000_000_000,
        min_tokens: 3,
        temperature: 0.7,
        top_p: 0.95,
        top_k: -1,
        min_p: 0.05,
        seed: Some(i64::MIN),
        stop_token_ids: vec![1, 128_001, 65_535, 65_536],
        ignore_eos: true,
        presence_penalty: -0.5,
        frequency_penalty: 1.25,
        repetition_penalty: 1.1,
        logprobs: Some(5),
        prompt_logprobs: Some(0),
        logit_bias: vec![(0, -100.0), (128_000, 2.5), (65_536, 100.0)],
        allowed_token_ids: Some(vec![0, 7, 128_815]),
        bad_words_token_ids: vec![vec![42], vec![1, 2, 65_536], vec![]],
        structured_outputs: Some(full_structured_outputs()),
        thinking_budget: Some(thinking_budget()),
        extra_args: Some(extra_args()),
    }
}

fn thinking_budget() -> ThinkingBudget {
    ThinkingBudget {
        budget: 4_000_000_000,
        start_token_ids: vec![vec![151_667], vec![8_420, 374, 847, 3_381, 1_882, 25]],
        end_token_ids: vec![vec![151_668], vec![]],
    }
}

/// vLLM's `vllm_xargs` shapes, and `kv_transfer_params` (any JSON) under its key.
fn extra_args() -> Value {
    map(vec![
        ("session_id", Value::from("sess-日本")),
        ("n", Value::from(-3)),
        ("big", Value::from(u64::MAX)),
        ("small", Value::from(i64::MIN)),
        ("x", Value::from(0.5f64)),
        (
            "list",
            Value::Array(vec![Value::from(1), Value::from("a"), Value::from(2.5f64)]),
        ),
        (
            "kv_transfer_params",
            map(vec![
                ("do_remote_prefill", Value::from(true)),
                (
                    "remote_block_ids",
                    Value::Array(vec![Value::from(1), Value::from(2)]),
                ),
                ("none", Value::Nil),
                ("nested", map(vec![("k", Value::Array(vec![]))])),
            ]),
        ),
    ])
}

/// Every field set, so the fixture checks each one's position (a frontend sets one).
fn full_structured_outputs() -> StructuredOutputs {
    StructuredOutputs {
        json: Some(
            r#"{"type":"object","properties":{"名前":{"type":"string","maxLength":8}}}"#.into(),
        ),
        regex: Some("[a-z]{1,3}\\d+".into()),
        choice: Some(vec![
            "yes".into(),
            "no".into(),
            "日本".into(),
            String::new(),
        ]),
        grammar: Some(r#"root ::= "a" | "b""#.into()),
        json_object: true,
        structural_tag: Some(
            r#"{"type":"structural_tag","format":{"type":"const_string","value":"x"}}"#.into(),
        ),
    }
}

fn full_output() -> EngineCoreOutput {
    EngineCoreOutput {
        request_id: "chatcmpl-日本語-🦀".into(),
        new_token_ids: vec![0, 127, 128, 255, 256, 65_535, 65_536, 4_294_967_295],
        finish_reason: Some(FinishReason::Stop.as_str().into()),
        stop_token_id: Some(128_001),
        new_logprobs: Some(logprobs()),
        num_cached_tokens: 1 << 40,
        error_message: Some("überlauf ✓".into()),
        prompt_logprobs: Some(logprobs()),
        queue_time: Some(0.015625),
        prefill_time: Some(1.5e-4),
        error_kind: Some(ErrorKind::InvalidRequest.as_str().into()),
        decode_time: Some(2.75),
        pooling_output: Some(vec![0.5, -0.125, 3.0e-39, f64::from(f32::MAX), -0.0]),
    }
}

fn full_pooling() -> PoolingParams {
    PoolingParams {
        task: PoolingTask::Score.as_str().into(),
        dimensions: Some(1 << 40),
        normalize: Some(false),
        use_activation: Some(false),
        token_type_start: Some(4_000_000_000),
    }
}

fn full_stats() -> SchedulerStats {
    SchedulerStats {
        num_running: 64,
        num_waiting: 300,
        kv_cache_usage: 0.4375,
        prefix_cache_queries: 1 << 33,
        prefix_cache_hits: (1 << 32) + 1,
        num_preemptions: 7,
        num_free_blocks: 65_536,
        num_total_blocks: 70_000,
    }
}

fn full_utility_output() -> UtilityOutput {
    UtilityOutput {
        call_id: u64::MAX,
        success: true,
        result: map(vec![
            (
                "ok",
                Value::Array(vec![
                    Value::from(1),
                    Value::from(-1),
                    Value::from(u64::MAX),
                    Value::from(i64::MIN),
                ]),
            ),
            ("π", Value::from(6.02214f64)),
            ("none", Value::Nil),
            ("b", Value::Binary(vec![0x00, 0xff])),
        ]),
        error_message: Some("partial ☃".into()),
    }
}

fn output(id: &str, ids: Vec<u32>, finish: Option<FinishReason>) -> EngineCoreOutput {
    EngineCoreOutput {
        request_id: id.into(),
        new_token_ids: ids,
        finish_reason: finish.map(|f| f.as_str().to_owned()),
        stop_token_id: None,
        new_logprobs: None,
        num_cached_tokens: 0,
        error_message: None,
        prompt_logprobs: None,
        queue_time: None,
        prefill_time: None,
        error_kind: None,
        decode_time: None,
        pooling_output: None,
    }
}

/// The Rust side of `tests/wire/wire_cases.py`, same names, same values.
fn cases() -> BTreeMap<&'static str, Case> {
    let mut short_sampling = SamplingParams::new(8);
    short_sampling.min_tokens = 2;
    short_sampling.temperature = 0.5;
    let cases = vec![
        (
            "hello",
            case(Hello {
                protocol_version: PROTOCOL_VERSION,
                engine_index: 3,
                pid: 4_194_304,
            }),
        ),
        (
            "init",
            case(Init {
                input_address: "ipc:///tmp/vrs-x/input.sock".into(),
                output_address: "tcp://[::1]:65535".into(),
                engine_config: map(vec![
                    ("mock", Value::from(true)),
                    ("max_model_len", Value::from(32_768)),
                    ("seed", Value::from(-1)),
                    ("big", Value::from(u64::MAX)),
                    ("small", Value::from(i64::MIN)),
                    ("gpu_memory_utilization", Value::from(0.9f64)),
                    ("model", Value::from("/models/Qwen3-0.6B/模型")),
                    ("dtype", Value::Nil),
                    (
                        "nested",
                        map(vec![
                            (
                                "list",
                                Value::Array(vec![
                                    Value::from(1),
                                    Value::from("two"),
                                    Value::from(3.0f64),
                                    Value::Nil,
                                    Value::from(false),
                                ]),
                            ),
                            ("empty", Value::Map(vec![])),
                        ]),
                    ),
                ]),
            }),
        ),
        (
            "ready",
            case(Ready {
                engine_index: 65_535,
                max_model_len: 131_072,
                vocab_size: 129_280,
                block_size: 16,
                num_kv_blocks: 1 << 31,
                eos_token_ids: vec![1, 128_001],
                model_name: "demo-模型".into(),
                is_mock: true,
                runner: "pooling".into(),
                pooling_tasks: vec!["classify".into(), "score".into()],
                classify_labels: vec!["no".into(), "yes 是".into()],
                ranks: vec![rank_memory(0, "cuda:0"), rank_memory(1, "cuda:1")],
            }),
        ),
        ("rank_memory", case(rank_memory(3, "cpu"))),
        (
            "ready_generate_short",
            case(Ready {
                engine_index: 0,
                max_model_len: 64,
                vocab_size: 100,
                block_size: 16,
                num_kv_blocks: 8,
                eos_token_ids: vec![2],
                model_name: "m".into(),
                is_mock: false,
                runner: "generate".into(),
                pooling_tasks: vec![],
                classify_labels: vec![],
                ranks: vec![],
            }),
        ),
        (
            // A peer from before Ready.ranks: every other field, no ranks.
            "ready_no_ranks",
            case(Ready {
                engine_index: 1,
                max_model_len: 64,
                vocab_size: 100,
                block_size: 16,
                num_kv_blocks: 8,
                eos_token_ids: vec![2],
                model_name: "m".into(),
                is_mock: false,
                runner: "pooling".into(),
                pooling_tasks: vec!["embed".into()],
                classify_labels: vec![],
                ranks: vec![],
            }),
        ),
        (
            "failed",
            case(Failed {
                engine_index: 1,
                message: "CUDA out of memory: 显存不足 💥".into(),
            }),
        ),
        ("sampling_params", case(full_sampling())),
        ("structured_outputs", case(full_structured_outputs())),
        (
            "structured_outputs_regex",
            case(StructuredOutputs {
                regex: Some("[0-9]+".into()),
                ..Default::default()
            }),
        ),
        ("sampling_params_defaults", case(SamplingParams::new(16))),
        ("sampling_params_short", case(short_sampling)),
        ("thinking_budget", case(thinking_budget())),
        (
            "engine_core_request",
            case(EngineCoreRequest {
                request_id: "cmpl-0123456789abcdef".into(),
                prompt_token_ids: vec![0, 1, 127, 128, 255, 256, 65_535, 65_536, 128_815],
                sampling_params: full_sampling(),
                arrival_time: 1_767_225_600.123456,
                priority: i64::MIN,
                cache_salt: Some("salt-🧂-\u{0}x".into()),
                pooling_params: Some(full_pooling()),
            }),
        ),
        (
            "engine_core_request_short",
            case(EngineCoreRequest {
                request_id: "r".into(),
                prompt_token_ids: vec![1, 2],
                sampling_params: SamplingParams::new(8),
                arrival_time: 0.5,
                priority: 0,
                cache_salt: None,
                pooling_params: None,
            }),
        ),
        (
            "abort_requests",
            case(AbortRequests {
                request_ids: vec!["a".into(), String::new(), "長い-id-🚀".repeat(20)],
            }),
        ),
        (
            "abort_requests_empty",
            case(AbortRequests {
                request_ids: vec![],
            }),
        ),
        (
            "utility_request",
            case(UtilityRequest {
                call_id: (1 << 63) + 5,
                method: "reset_prefix_cache".into(),
                args: vec![
                    Value::from(1),
                    Value::from(-2),
                    Value::from(u64::MAX),
                    Value::from(i64::MIN),
                    Value::from(0.5f64),
                    Value::from(f64::INFINITY),
                    Value::from("ß"),
                    Value::Nil,
                    Value::from(true),
                    Value::Binary(vec![1, 2]),
                    Value::Array(vec![
                        Value::from(1),
                        Value::Array(vec![Value::from(2), Value::Array(vec![])]),
                    ]),
                    map(vec![("k", map(vec![("v", Value::from(-1.5f64))]))]),
                ],
            }),
        ),
        (
            "utility_request_no_args",
            case(UtilityRequest {
                call_id: 0,
                method: "get_stats".into(),
                args: vec![],
            }),
        ),
        ("token_logprobs", case(logprobs().remove(0))),
        ("engine_core_output", case(full_output())),
        (
            "engine_core_output_running",
            case(output("r", vec![42], None)),
        ),
        (
            "engine_core_output_short",
            case(output("r", vec![1, 2], None)),
        ),
        ("utility_output", case(full_utility_output())),
        (
            "utility_output_failed",
            case(UtilityOutput {
                call_id: 9,
                success: false,
                result: Value::Nil,
                error_message: Some("no such method".into()),
            }),
        ),
        ("pooling_params", case(full_pooling())),
        (
            "pooling_params_embed",
            case(PoolingParams {
                dimensions: Some(256),
                ..PoolingParams::new(PoolingTask::Embed)
            }),
        ),
        ("scheduler_stats", case(full_stats())),
        ("scheduler_stats_defaults", case(SchedulerStats::default())),
        (
            "engine_outputs",
            case(EngineOutputs {
                engine_index: 2,
                outputs: vec![
                    full_output(),
                    EngineCoreOutput {
                        error_message: Some("boom".into()),
                        ..output("x", vec![], Some(FinishReason::Error))
                    },
                    output("y", vec![5], Some(FinishReason::Length)),
                    output("z", vec![], Some(FinishReason::Abort)),
                ],
                timestamp: -0.0,
                scheduler_stats: Some(full_stats()),
                utility_output: Some(full_utility_output()),
            }),
        ),
        (
            "engine_outputs_minimal",
            case(EngineOutputs {
                engine_index: 0,
                outputs: vec![],
                timestamp: 1e-9,
                scheduler_stats: None,
                utility_output: None,
            }),
        ),
    ];
    let n = cases.len();
    let cases: BTreeMap<_, _> = cases.into_iter().collect();
    assert_eq!(cases.len(), n, "duplicate case names");
    cases
}

fn repo_root() -> PathBuf {
    // The checkout cargo runs the test from: a compile-time `env!` path may name another
    // checkout when the target dir is shared (cargo reuses the artifact).
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn python(script: &str, dir: &Path) -> std::process::Output {
    let root = repo_root();
    let exe = std::env::var("VRS_PYTHON").unwrap_or_else(|_| "python3".into());
    let pythonpath = match std::env::var_os("PYTHONPATH") {
        Some(old) if !old.is_empty() => {
            let mut paths = vec![root.clone()];
            paths.extend(std::env::split_paths(&old));
            std::env::join_paths(paths).expect("PYTHONPATH")
        }
        _ => root.clone().into_os_string(),
    };
    Command::new(&exe)
        .arg(root.join("tests/wire").join(script))
        .arg(dir)
        .env("PYTHONPATH", pythonpath)
        .current_dir(&root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {exe} (set VRS_PYTHON): {e}"))
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

#[derive(serde::Deserialize)]
struct ManifestEntry {
    name: String,
    #[serde(rename = "type")]
    type_name: String,
    file: String,
    canonical: bool,
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn python_fixtures_decode_and_reencode_identically() {
    let dir = fresh_dir("wire-fixtures");
    let out = python("make_fixtures.py", &dir);
    assert!(
        out.status.success(),
        "make_fixtures.py failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: Vec<ManifestEntry> =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    let cases = cases();
    let mut failures = Vec::new();
    let python_names: Vec<&str> = manifest.iter().map(|e| e.name.as_str()).collect();
    for name in cases.keys() {
        if !python_names.contains(name) {
            failures.push(format!("{name}: rust case python does not make"));
        }
    }
    for entry in &manifest {
        let Some(case) = cases.get(entry.name.as_str()) else {
            failures.push(format!("{}: python case rust does not know", entry.name));
            continue;
        };
        if case.type_name != entry.type_name {
            failures.push(format!(
                "{}: python type {} but rust type {}",
                entry.name, entry.type_name, case.type_name
            ));
        }
        let bytes = std::fs::read(dir.join(&entry.file)).unwrap();
        if let Err(e) = (case.check)(&bytes, entry.canonical) {
            failures.push(format!("{}: {e}", entry.name));
        }
        if entry.canonical && bytes != case.native {
            failures.push(format!(
                "{}: native rust encoding differs\n  python {}\n  rust   {}",
                entry.name,
                hex(&bytes),
                hex(&case.native)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "wire mismatch:\n{}",
        failures.join("\n")
    );
}

#[cfg_attr(not(feature = "python-tests"), ignore = "needs Python")]
#[test]
fn rust_encoded_messages_decode_in_python() {
    let dir = fresh_dir("wire-rust-encoded");
    for (name, case) in cases() {
        std::fs::write(dir.join(format!("{name}.msgpack")), &case.native).unwrap();
    }
    let out = python("check_rust_encoded.py", &dir);
    assert!(
        out.status.success(),
        "check_rust_encoded.py failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
