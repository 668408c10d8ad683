//! The mappings through both codecs: vrs requests encoded by [`VllmWire`] and read
//! back as msgpack; vLLM's own output bytes (the fixtures vLLM's encoder wrote, in
//! rust/wire/tests/fixtures/vllm) decoded into vrs's types.

use rmpv::Value;
use vrs_wire::{
    EngineCoreRequest, PoolingParams, PoolingTask, SamplingParams, StructuredOutputs,
    ThinkingBudget,
};

use super::*;
use crate::fake::vllm::message::field;
use crate::wire::{Decoded, Wire};

mod client;
mod coordinator;

fn request(params: SamplingParams) -> EngineCoreRequest {
    EngineCoreRequest {
        request_id: "r1".into(),
        prompt_token_ids: vec![3, 4, 5],
        sampling_params: params,
        arrival_time: 1_700_000_000.5,
        priority: -1,
        cache_salt: Some("salt".into()),
        pooling_params: None,
    }
}

/// A plain request `id` for `max_tokens` tokens (the client and coordinator tests).
fn plain_request(id: &str, max_tokens: u32) -> EngineCoreRequest {
    EngineCoreRequest {
        request_id: id.into(),
        prompt_token_ids: vec![3, 4, 5],
        sampling_params: SamplingParams::new(max_tokens),
        arrival_time: 0.0,
        priority: 0,
        cache_salt: None,
        pooling_params: None,
    }
}

/// The ADD's message (frame 1) as msgpack, after checking the type frame.
fn add_body(frames: &[Vec<u8>]) -> Value {
    assert_eq!(frames[0], vec![0x00], "ADD type frame");
    assert_eq!(frames.len(), 2, "no arrays, so no aux frames");
    rmpv::decode::read_value(&mut &frames[1][..]).unwrap()
}

fn ints(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

#[test]
fn a_request_maps_field_for_field() {
    let mut p = SamplingParams::new(7);
    p.temperature = 0.7;
    p.top_p = 0.9;
    p.top_k = 40;
    p.min_p = 0.05;
    p.seed = Some(3);
    p.min_tokens = 2;
    p.stop_token_ids = vec![5];
    p.presence_penalty = 0.1;
    p.frequency_penalty = 0.2;
    p.repetition_penalty = 1.1;
    p.logprobs = Some(2);
    p.prompt_logprobs = Some(1);
    p.logit_bias = vec![(9, -1.5)];
    p.allowed_token_ids = Some(vec![1, 2, 3]);
    p.bad_words_token_ids = vec![vec![4, 5]];
    p.structured_outputs = Some(StructuredOutputs {
        json: Some(r#"{"type":"object"}"#.into()),
        ..StructuredOutputs::default()
    });
    p.thinking_budget = Some(ThinkingBudget {
        budget: 64,
        start_token_ids: vec![vec![8]],
        end_token_ids: vec![vec![9]],
    });
    let wire = VllmWire::new(vec![1, 7], 100);
    let body = add_body(&wire.encode_add(&request(p)).unwrap());
    let f = body.as_array().unwrap();
    assert_eq!(
        f.len(),
        22,
        "EngineCoreRequest is written with all its fields"
    );
    assert_eq!(f[0].as_str(), Some("r1"));
    assert_eq!(ints(&f[1]), vec![3, 4, 5]);
    assert_eq!(f[5].as_f64(), Some(1_700_000_000.5), "arrival_time");
    assert_eq!(f[7].as_str(), Some("salt"), "cache_salt");
    assert_eq!(f[13].as_i64(), Some(-1), "priority");
    let sp = &f[3];
    let num = |key| {
        field(sp, key)
            .as_f64()
            .unwrap_or_else(|| panic!("{key}: {sp}"))
    };
    let int = |key| {
        field(sp, key)
            .as_i64()
            .unwrap_or_else(|| panic!("{key}: {sp}"))
    };
    assert!(
        field(sp, "n").is_nil(),
        "n is 1, vLLM's default, so not written"
    );
    assert_eq!(num("temperature"), 0.7);
    assert_eq!(num("top_p"), 0.9);
    assert_eq!(int("top_k"), 40);
    assert_eq!(num("min_p"), 0.05);
    assert_eq!(int("seed"), 3);
    assert_eq!(num("presence_penalty"), 0.1);
    assert_eq!(num("frequency_penalty"), 0.2);
    assert_eq!(num("repetition_penalty"), 1.1);
    assert_eq!(int("max_tokens"), 7);
    assert_eq!(int("min_tokens"), 2);
    assert_eq!(int("logprobs"), 2);
    assert_eq!(int("prompt_logprobs"), 1);
    assert_eq!(int("thinking_token_budget"), 64);
    assert_eq!(
        field(sp, "stop"),
        &Value::Array(vec![]),
        "the frontend matches stop strings"
    );
    assert_eq!(
        ints(field(sp, "stop_token_ids")),
        vec![5, 7],
        "the second EOS stops too"
    );
    assert_eq!(int("_eos_token_id"), 1, "the primary EOS");
    assert_eq!(ints(field(sp, "_all_stop_token_ids")), vec![5, 1, 7]);
    assert_eq!(ints(field(sp, "allowed_token_ids")), vec![1, 2, 3]);
    let bad = field(sp, "_bad_words_token_ids").as_array().unwrap();
    assert_eq!(ints(&bad[0]), vec![4, 5]);
    let bias = field(sp, "logit_bias").as_map().unwrap();
    assert_eq!(
        (bias[0].0.as_i64(), bias[0].1.as_f64()),
        (Some(9), Some(-1.5))
    );
    let so = field(sp, "structured_outputs");
    assert_eq!(field(so, "json").as_str(), Some(r#"{"type":"object"}"#));
    assert!(field(so, "regex").is_nil());
    assert_eq!(field(sp, "skip_reading_prefix_cache").as_bool(), Some(true));
}

#[test]
fn ignore_eos_keeps_eos_out_of_the_stops_but_in_the_stop_set() {
    let mut p = SamplingParams::new(4);
    p.ignore_eos = true;
    let body = add_body(
        &VllmWire::new(vec![1, 7], 0)
            .encode_add(&request(p))
            .unwrap(),
    );
    let sp = &body.as_array().unwrap()[3];
    assert!(field(sp, "_eos_token_id").is_nil());
    assert_eq!(field(sp, "ignore_eos").as_bool(), Some(true));
    assert_eq!(field(sp, "stop_token_ids"), &Value::Array(vec![]));
    assert_eq!(ints(field(sp, "_all_stop_token_ids")), vec![1, 7]);
}

#[test]
fn a_pooling_request_is_unsupported_naming_the_field() {
    let mut req = request(SamplingParams::new(1));
    req.pooling_params = Some(PoolingParams::new(PoolingTask::Embed));
    match VllmWire::new(vec![1], 0).encode_add(&req) {
        Err(EngineError::Unsupported(message)) => assert!(message.contains("pooling_params")),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn an_abort_is_vllms_list_of_ids() {
    let frames = VllmWire::new(vec![], 0)
        .encode_abort(vec!["a".into(), "b".into()])
        .unwrap();
    assert_eq!(frames, vrs_wire::vllm::encode_abort(&["a", "b"]));
    assert_eq!(frames[0], vec![0x01]);
}

/// A fixture's frames as ZMQ messages.
fn fixture(name: &str) -> Vec<zmq::Message> {
    let path = format!(
        "{}/../wire/tests/fixtures/vllm/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let frames = rmpv::decode::read_value(&mut &bytes[..]).unwrap();
    frames
        .as_array()
        .unwrap()
        .iter()
        .map(|f| zmq::Message::from(f.as_slice().unwrap()))
        .collect()
}

fn outputs(wire: &VllmWire, name: &str) -> vrs_wire::EngineOutputs {
    match wire.decode(&fixture(name)).unwrap() {
        Decoded::Outputs(o) => o,
        Decoded::Dead => panic!("{name}: not the dead sentinel"),
    }
}

#[test]
fn logprobs_in_aux_frames_become_rows_of_sampled_and_top_k() {
    let frames = fixture("outputs_logprobs_aux");
    assert_eq!(frames.len(), 4, "the arrays travel in three aux frames");
    let out = outputs(&VllmWire::new(vec![], 0), "outputs_logprobs_aux");
    let rows = out.outputs[0].new_logprobs.as_ref().unwrap();
    // vLLM's own decode of the same frames: [8, 9] ids and logprobs, [8] ranks.
    let views: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    let Ok(v::EngineMessage::Outputs(raw)) = v::decode_engine_message(&views) else {
        panic!("the fixture decodes");
    };
    let lists = raw.outputs[0].new_logprobs.as_ref().unwrap();
    let (ids, lps) = (
        lists.logprob_token_ids.to_i64().unwrap(),
        lists.logprobs.to_f32().unwrap(),
    );
    let ranks = lists.sampled_token_ranks.to_i64().unwrap();
    assert_eq!(rows.len(), 8);
    for (r, row) in rows.iter().enumerate() {
        assert_eq!(
            i64::from(row.token_id),
            ids[r * 9],
            "row {r}: column 0 is the sampled token"
        );
        assert_eq!(row.logprob, f64::from(lps[r * 9]));
        assert_eq!(i64::from(row.rank), ranks[r]);
        let top: Vec<i64> = row.top_token_ids.iter().map(|&t| i64::from(t)).collect();
        assert_eq!(
            top,
            ids[r * 9 + 1..(r + 1) * 9].to_vec(),
            "row {r}: the top 8"
        );
        assert_eq!(row.top_logprobs.len(), 8);
    }
    assert_eq!((rows[0].token_id, rows[0].top_token_ids[0]), (30, 31));
    assert_eq!(rows[7].top_token_ids[7], 101);
}

#[test]
fn inline_logprobs_decode_the_same_way() {
    let out = outputs(&VllmWire::new(vec![], 0), "outputs_logprobs_inline");
    let row = &out.outputs[0].new_logprobs.as_ref().unwrap()[0];
    assert_eq!((row.token_id, row.rank), (21, 1));
    assert_eq!(row.top_token_ids, vec![22, 23]);
    assert_eq!(
        (row.logprob, row.top_logprobs.clone()),
        (-0.0, vec![-0.125, -0.25])
    );
}

#[test]
fn finish_reasons_and_stop_tokens_follow_vllms_detokenizer() {
    let out = outputs(&VllmWire::new(vec![], 0), "outputs_finished");
    let got: Vec<(&str, Option<&str>, Option<u32>)> = out
        .outputs
        .iter()
        .map(|o| {
            (
                o.request_id.as_str(),
                o.finish_reason.as_deref(),
                o.stop_token_id,
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("req-stop-str", Some("stop"), None),
            ("req-stop-id", Some("stop"), Some(9)),
            ("req-eos", Some("stop"), Some(2)),
            ("req-length", Some("length"), None),
            ("req-abort", Some("abort"), None),
            ("req-nan", Some("length"), None),
        ]
    );
    assert_eq!(out.engine_index, 1);
}

#[test]
fn scheduler_stats_accumulate_prefix_cache_deltas_per_engine() {
    let wire = VllmWire::new(vec![], 800);
    let first = outputs(&wire, "outputs_scheduler_stats")
        .scheduler_stats
        .unwrap();
    assert_eq!((first.num_running, first.num_waiting), (3, 2));
    assert_eq!(first.kv_cache_usage, 0.375);
    assert_eq!((first.num_total_blocks, first.num_free_blocks), (800, 500));
    assert_eq!(
        (first.prefix_cache_queries, first.prefix_cache_hits),
        (640, 512)
    );
    let second = outputs(&wire, "outputs_scheduler_stats")
        .scheduler_stats
        .unwrap();
    assert_eq!(
        (second.prefix_cache_queries, second.prefix_cache_hits),
        (1280, 1024)
    );
}

#[test]
fn a_failed_utility_call_is_reported_as_one() {
    let out = outputs(&VllmWire::new(vec![], 0), "outputs_utility_failed");
    let u = out.utility_output.unwrap();
    assert!(!u.success);
    assert!(u.error_message.unwrap().contains("boom"));
}

#[test]
fn the_dead_sentinel_and_garbage_are_told_apart() {
    let wire = VllmWire::new(vec![], 0);
    assert!(matches!(
        wire.decode(&fixture("engine_dead")),
        Ok(Decoded::Dead)
    ));
    let garbage = [zmq::Message::from(&b"\xc1"[..])];
    match wire.decode(&garbage) {
        Err(EngineError::Protocol(m)) => assert!(m.contains("vLLM engine"), "{m}"),
        other => panic!("expected a protocol error, got {other:?}"),
    }
}

#[test]
fn a_ready_response_becomes_vrs_ready() {
    let bytes = crate::fake::vllm::message::ready_response(3);
    let response = v::decode_ready_response(&bytes).unwrap();
    let model = ModelInfo {
        vocab_size: 32000,
        eos_token_ids: vec![2],
        model_name: "m".into(),
    };
    let ready = to_vrs_ready(3, &response, &model);
    assert_eq!((ready.engine_index, ready.max_model_len), (3, 2048));
    assert_eq!((ready.block_size, ready.num_kv_blocks), (16, 400));
    assert_eq!(
        (ready.vocab_size, ready.eos_token_ids.clone()),
        (32000, vec![2])
    );
    assert_eq!(ready.runner, "generate");
}
