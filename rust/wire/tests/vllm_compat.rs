//! vLLM 0.33 engine-core wire against fixtures written by vLLM's own encoder
//! (`tests/vllm_compat/make_fixtures.py`): every frontend-direction message re-encodes to
//! exactly vLLM's frames, every engine-direction message decodes to the expected values.

use std::path::PathBuf;

use serde_json::Value as J;
use vrs_wire::vllm::{
    decode_engine_message, decode_handshake, decode_ready_response, encode_abort, encode_add,
    encode_handshake_metadata, encode_utility, Any, EngineCoreRequest, EngineHandshakeMetadata,
    EngineMessage, FinishReason, SamplingParams, StopReason, VllmWireError,
};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/vllm")
}

struct Case {
    name: String,
    direction: String,
    kind: String,
    frames: Vec<Vec<u8>>,
    expected: J,
}

fn cases() -> Vec<Case> {
    let index: J =
        serde_json::from_slice(&std::fs::read(dir().join("cases.json")).unwrap()).unwrap();
    index
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_owned();
            let raw = std::fs::read(dir().join(format!("{name}.bin"))).unwrap();
            let frames = match rmpv::decode::read_value(&mut raw.as_slice()).unwrap() {
                rmpv::Value::Array(items) => items
                    .into_iter()
                    .map(|f| match f {
                        rmpv::Value::Binary(b) => b,
                        other => panic!("{name}: frame is not bin: {other:?}"),
                    })
                    .collect::<Vec<_>>(),
                other => panic!("{name}: not a frame list: {other:?}"),
            };
            assert_eq!(frames.len() as u64, c["frames"].as_u64().unwrap(), "{name}");
            Case {
                name,
                direction: c["direction"].as_str().unwrap().to_owned(),
                kind: c["kind"].as_str().unwrap().to_owned(),
                frames,
                expected: c["expected"].clone(),
            }
        })
        .collect()
}

/// Every key the Rust value has must be in `expected` with an equal value (vLLM's fields
/// that the Rust side does not model are left out of the comparison).
fn assert_matches(actual: &J, expected: &J, path: &str) {
    match (actual, expected) {
        (J::Object(a), J::Object(e)) => {
            for (k, v) in a {
                let ev = e
                    .get(k)
                    .unwrap_or_else(|| panic!("{path}.{k}: not in vLLM's value"));
                assert_matches(v, ev, &format!("{path}.{k}"));
            }
        }
        (J::Array(a), J::Array(e)) => {
            assert_eq!(a.len(), e.len(), "{path}: length");
            for (i, (x, y)) in a.iter().zip(e).enumerate() {
                assert_matches(x, y, &format!("{path}[{i}]"));
            }
        }
        (J::Number(a), J::Number(e)) if a.is_f64() || e.is_f64() => {
            assert_eq!(a.as_f64(), e.as_f64(), "{path}")
        }
        _ => assert_eq!(actual, expected, "{path}"),
    }
}

const UNMODELLED_REQUEST_FIELDS: [&str; 5] = [
    "mm_features",
    "pooling_params",
    "lora_request",
    "prompt_embeds",
    "kv_hints",
];

fn encode_frontend(case: &Case) -> Vec<Vec<u8>> {
    let e = &case.expected;
    match case.kind.as_str() {
        "add" => {
            for field in UNMODELLED_REQUEST_FIELDS {
                assert!(e[field].is_null(), "{}: {field} is set", case.name);
            }
            let req: EngineCoreRequest = serde_json::from_value(e.clone()).unwrap();
            encode_add(&req)
        }
        "abort" => {
            let ids: Vec<String> = serde_json::from_value(e.clone()).unwrap();
            encode_abort(&ids)
        }
        "utility" => {
            let args: Vec<Any> = serde_json::from_value(e[3].clone()).unwrap();
            encode_utility(
                e[0].as_i64().unwrap(),
                e[1].as_u64().unwrap(),
                e[2].as_str().unwrap(),
                &args,
            )
        }
        "handshake_init" => {
            let meta: EngineHandshakeMetadata = serde_json::from_value(e.clone()).unwrap();
            vec![encode_handshake_metadata(&meta)]
        }
        other => panic!("{}: unknown frontend kind {other}", case.name),
    }
}

#[test]
fn frontend_messages_encode_to_vllms_bytes() {
    let all = cases();
    let frontend: Vec<&Case> = all.iter().filter(|c| c.direction == "frontend").collect();
    assert!(
        frontend.len() >= 12,
        "expected the full frontend fixture set"
    );
    for case in frontend {
        let frames = encode_frontend(case);
        assert_eq!(
            frames.len(),
            case.frames.len(),
            "{}: frame count",
            case.name
        );
        for (i, (ours, theirs)) in frames.iter().zip(&case.frames).enumerate() {
            assert_eq!(
                ours, theirs,
                "{}: frame {i} differs from vLLM's bytes",
                case.name
            );
        }
    }
}

/// `{"__map__": [[k, v], ...]}` (a Python dict in the fixtures) as a JSON object.
fn map_as_object(v: &J) -> J {
    let pairs = v["__map__"].as_array().unwrap();
    J::Object(
        pairs
            .iter()
            .map(|p| (p[0].as_str().unwrap().to_owned(), p[1].clone()))
            .collect(),
    )
}

#[test]
fn engine_messages_decode_to_vllms_values() {
    let all = cases();
    let engine: Vec<&Case> = all.iter().filter(|c| c.direction == "engine").collect();
    assert!(engine.len() >= 14, "expected the full engine fixture set");
    for case in engine {
        let e = &case.expected;
        match case.kind.as_str() {
            "outputs" => match decode_engine_message(&case.frames).unwrap() {
                EngineMessage::Outputs(out) => {
                    assert_matches(&serde_json::to_value(&out).unwrap(), e, &case.name)
                }
                EngineMessage::EngineDead => panic!("{}: decoded as dead", case.name),
            },
            "dead" => assert_eq!(
                decode_engine_message(&case.frames).unwrap(),
                EngineMessage::EngineDead
            ),
            "handshake" => {
                let msg = decode_handshake(&case.frames[0]).unwrap();
                let actual = serde_json::to_value(&msg).unwrap();
                let expected = map_as_object(e);
                // Keys vLLM did not send decode as null.
                for (k, v) in actual.as_object().unwrap() {
                    assert_eq!(expected.get(k).unwrap_or(&J::Null), v, "{}.{k}", case.name);
                }
            }
            "ready_response" => {
                let r = decode_ready_response(&case.frames[0]).unwrap();
                assert_matches(&serde_json::to_value(&r).unwrap(), e, &case.name);
            }
            other => panic!("{}: unknown engine kind {other}", case.name),
        }
    }
}

fn outputs(name: &str) -> vrs_wire::vllm::EngineCoreOutputs {
    let case = cases().into_iter().find(|c| c.name == name).unwrap();
    match decode_engine_message(&case.frames).unwrap() {
        EngineMessage::Outputs(out) => *out,
        EngineMessage::EngineDead => panic!("dead"),
    }
}

#[test]
fn typed_values_of_the_engine_direction() {
    let fin = outputs("outputs_finished");
    let reasons: Vec<_> = fin
        .outputs
        .iter()
        .map(|o| (o.finish_reason, o.stop_reason.clone()))
        .collect();
    assert_eq!(
        reasons[0],
        (
            Some(FinishReason::Stop),
            Some(StopReason::Text("###".into()))
        )
    );
    assert_eq!(
        reasons[1],
        (Some(FinishReason::Stop), Some(StopReason::Token(9)))
    );
    assert_eq!(reasons[3].0.map(FinishReason::as_str), Some("length"));
    assert_eq!(reasons[4].0, Some(FinishReason::Abort));
    assert_eq!(fin.outputs[5].num_nans_in_logits, 3);
    assert_eq!(fin.finished_requests, Some(vec!["req-abort".to_owned()]));

    let big = outputs("outputs_logprobs_aux");
    let lp = big.outputs[0].new_logprobs.as_ref().unwrap();
    assert_eq!(lp.logprobs.shape, vec![8, 9]);
    let values = lp.logprobs.to_f32().unwrap();
    assert_eq!(values[..3], [-0.0, -0.125, -0.25]);
    assert_eq!(lp.logprob_token_ids.to_i64().unwrap()[..2], [30, 31]);
    let prompt = big.outputs[0].new_prompt_logprobs_tensors.as_ref().unwrap();
    assert_eq!(prompt.logprob_token_ids.dtype, "int64");
    assert_eq!(prompt.logprob_token_ids.to_i64().unwrap()[35], 135);
    assert_eq!(prompt.logprobs.to_f32().unwrap()[4], -1.0);

    let stats = outputs("outputs_scheduler_stats").scheduler_stats.unwrap();
    assert_eq!((stats.num_running_reqs, stats.num_waiting_reqs), (3, 2));
    assert_eq!(stats.kv_cache_usage, 0.375);
    assert_eq!(stats.prefix_cache_stats.hits, 512);

    let ok = outputs("outputs_utility_ok").utility_output.unwrap();
    assert_eq!(ok.call_id, 0x1F2E_3D4C_5B6A_7988);
    assert!(ok.failure_message.is_none());
    let failed = outputs("outputs_utility_failed").utility_output.unwrap();
    assert!(failed.failure_message.unwrap().contains("boom"));
    assert_eq!(outputs("outputs_dp_wave").wave_complete, Some(4));
    let extras = outputs("outputs_extras");
    assert_eq!(
        (extras.start_wave, extras.weight_version.as_deref()),
        (Some(2), Some("v7"))
    );
    assert_eq!(
        extras.outputs[0].mm_cache_miss_hashes,
        Some(vec!["h1".to_owned()])
    );
    assert!(extras.outputs[0].kv_transfer_params.is_some());
}

#[test]
fn normalize_matches_vllms_post_init() {
    let case = cases().into_iter().find(|c| c.name == "add_full").unwrap();
    let sent: EngineCoreRequest = serde_json::from_value(case.expected).unwrap();
    let sent = sent.sampling_params.unwrap();
    let mut ours = SamplingParams {
        presence_penalty: 0.5,
        frequency_penalty: 0.25,
        repetition_penalty: 1.125,
        temperature: 0.75,
        top_p: 0.875,
        top_k: 40,
        min_p: 0.0625,
        seed: Some(1234),
        stop: Some(vec!["\n\nUser:".into(), "###".into()]),
        stop_token_ids: Some(vec![7, 9, 7]),
        max_tokens: Some(128),
        min_tokens: 4,
        logprobs: Some(5),
        prompt_logprobs: Some(3),
        include_stop_str_in_output: true,
        output_kind: 1,
        logit_bias: sent.logit_bias.clone(),
        allowed_token_ids: Some(vec![3, 5, 7, 9, 50]),
        bad_words: Some(vec!["darn".into(), "heck".into()]),
        skip_special_tokens: false,
        ..SamplingParams::default()
    };
    ours.normalize();
    ours.eos_token_id = Some(2);
    ours.all_stop_token_ids.push(2);
    ours.bad_words_token_ids = sent.bad_words_token_ids.clone();
    // A Python set's order is its hash order; the engine reads a set.
    ours.all_stop_token_ids.sort_unstable();
    let mut theirs = sent;
    theirs.all_stop_token_ids.sort_unstable();
    assert_eq!(ours, theirs);
}

#[test]
fn malformed_messages_are_typed_errors() {
    let case = cases()
        .into_iter()
        .find(|c| c.name == "outputs_logprobs_aux")
        .unwrap();
    // Aux frames missing.
    let err = decode_engine_message(&case.frames[..1]).unwrap_err();
    assert!(
        matches!(
            err,
            VllmWireError::AuxFrame {
                index: 1,
                frames: 1,
                ..
            }
        ),
        "{err}"
    );
    // Truncated main frame.
    let cut = [case.frames[0][..case.frames[0].len() - 3].to_vec()];
    assert!(matches!(
        decode_engine_message(&cut).unwrap_err(),
        VllmWireError::Msgpack(_)
    ));
    // Wrong size of an aux frame.
    let mut short = case.frames.clone();
    short[2].pop();
    assert!(matches!(
        decode_engine_message(&short).unwrap_err(),
        VllmWireError::Array(_)
    ));
    // An unknown finish reason names the field.
    let bad = rmpv::Value::Array(vec![
        0.into(),
        rmpv::Value::Array(vec![rmpv::Value::Array(vec![
            "r".into(),
            rmpv::Value::Array(vec![]),
            rmpv::Value::Nil,
            rmpv::Value::Nil,
            rmpv::Value::Nil,
            9.into(),
        ])]),
    ]);
    let mut buf = Vec::new();
    rmpv::encode::write_value(&mut buf, &bad).unwrap();
    let err = decode_engine_message(&[buf]).unwrap_err();
    assert!(
        err.to_string().contains("EngineCoreOutput.finish_reason"),
        "{err}"
    );
    // More fields than vLLM 0.33 has.
    let long = rmpv::Value::Array(vec![rmpv::Value::Nil; 10]);
    let mut buf = Vec::new();
    rmpv::encode::write_value(&mut buf, &long).unwrap();
    assert!(matches!(
        decode_engine_message(&[buf]).unwrap_err(),
        VllmWireError::TooManyFields { max: 9, .. }
    ));
    assert!(matches!(
        vrs_wire::vllm::RequestType::try_from(&[7u8][..]).unwrap_err(),
        VllmWireError::RequestTypeFrame(_)
    ));
    let empty: [&[u8]; 0] = [];
    assert_eq!(
        decode_engine_message(&empty).unwrap_err(),
        VllmWireError::NoFrames
    );
}

mod props {
    use proptest::prelude::*;
    use vrs_wire::vllm::{decode_engine_message, decode_handshake, decode_ready_response};

    proptest! {
        #[test]
        fn decoders_never_panic(frames in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..4)) {
            let _ = decode_engine_message(&frames);
            if let Some(f) = frames.first() {
                let _ = decode_handshake(f);
                let _ = decode_ready_response(f);
            }
        }

        #[test]
        fn mutated_fixture_never_panics(pos in 0usize..351, byte in any::<u8>()) {
            static FRAMES: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
            let mut frames = FRAMES
                .get_or_init(|| {
                    super::cases().into_iter().find(|c| c.name == "outputs_logprobs_aux").unwrap().frames
                })
                .clone();
            let n = frames[0].len();
            frames[0][pos % n] = byte;
            let _ = decode_engine_message(&frames);
        }
    }
}
