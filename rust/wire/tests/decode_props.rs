//! Property tests of the msgpack codec: any bytes decode to a value or an error (never a
//! panic), every generated message survives encode → decode unchanged, and damaged
//! messages (cut short, extended, flipped bytes) are refused or decode to something
//! that re-encodes the same way.

use proptest::prelude::*;
use vrs_wire::{
    decode, encode, AbortRequests, EngineCoreOutput, EngineCoreRequest, EngineOutputs,
    SamplingParams, SchedulerStats, StructuredOutputs, TokenLogprobs, UtilityOutput,
};

fn finite() -> impl Strategy<Value = f64> {
    prop::num::f64::NORMAL | prop::num::f64::ZERO | prop::num::f64::SUBNORMAL
}

fn logprobs() -> impl Strategy<Value = TokenLogprobs> {
    (
        any::<u32>(),
        finite(),
        any::<u32>(),
        prop::collection::vec((any::<u32>(), finite()), 0..4),
    )
        .prop_map(|(token_id, logprob, rank, top)| TokenLogprobs {
            token_id,
            logprob,
            rank,
            top_token_ids: top.iter().map(|t| t.0).collect(),
            top_logprobs: top.iter().map(|t| t.1).collect(),
        })
}

fn output() -> impl Strategy<Value = EngineCoreOutput> {
    (
        "\\PC{0,12}",
        prop::collection::vec(any::<u32>(), 0..6),
        prop::option::of(prop::sample::select(vec![
            "stop", "length", "abort", "error",
        ])),
        prop::option::of(any::<u32>()),
        prop::option::of(prop::collection::vec(logprobs(), 0..3)),
        any::<u64>(),
        prop::option::of("\\PC{0,20}"),
        prop::option::of(prop::sample::select(vec!["invalid_request", "other"])),
        prop::option::of(finite()),
    )
        .prop_map(
            |(id, ids, finish, stop, lps, cached, error, kind, decode)| EngineCoreOutput {
                request_id: id,
                new_token_ids: ids,
                finish_reason: finish.map(str::to_owned),
                stop_token_id: stop,
                new_logprobs: lps,
                num_cached_tokens: cached,
                error_message: error,
                prompt_logprobs: None,
                queue_time: None,
                prefill_time: None,
                error_kind: kind.map(str::to_owned),
                decode_time: decode,
                pooling_output: None,
            },
        )
}

fn stats() -> impl Strategy<Value = SchedulerStats> {
    (any::<[u64; 7]>(), finite()).prop_map(|(n, usage)| SchedulerStats {
        num_running: n[0],
        num_waiting: n[1],
        kv_cache_usage: usage,
        prefix_cache_queries: n[2],
        prefix_cache_hits: n[3],
        num_preemptions: n[4],
        num_free_blocks: n[5],
        num_total_blocks: n[6],
    })
}

fn outputs() -> impl Strategy<Value = EngineOutputs> {
    (
        any::<u32>(),
        prop::collection::vec(output(), 0..4),
        finite(),
        prop::option::of(stats()),
        prop::option::of((any::<u64>(), any::<bool>(), prop::option::of("\\PC{0,8}"))),
    )
        .prop_map(
            |(engine_index, outputs, timestamp, stats, utility)| EngineOutputs {
                engine_index,
                outputs,
                timestamp,
                scheduler_stats: stats,
                utility_output: utility.map(|(call_id, success, error)| UtilityOutput {
                    call_id,
                    success,
                    result: rmpv::Value::Nil,
                    error_message: error,
                }),
            },
        )
}

fn structured_outputs() -> impl Strategy<Value = StructuredOutputs> {
    (
        prop::option::of("\\PC{0,16}"),
        prop::option::of("\\PC{0,8}"),
        prop::option::of(prop::collection::vec("\\PC{0,4}", 0..3)),
        prop::option::of("\\PC{0,8}"),
        any::<bool>(),
        prop::option::of("\\PC{0,8}"),
    )
        .prop_map(
            |(json, regex, choice, grammar, json_object, structural_tag)| StructuredOutputs {
                json,
                regex,
                choice,
                grammar,
                json_object,
                structural_tag,
            },
        )
}

fn request() -> impl Strategy<Value = EngineCoreRequest> {
    (
        "\\PC{0,12}",
        prop::collection::vec(any::<u32>(), 0..8),
        any::<u32>(),
        prop::option::of(any::<i64>()),
        prop::option::of(0u32..21),
        finite(),
        prop::option::of(structured_outputs()),
        any::<i64>(),
        prop::option::of("\\PC{0,8}"),
    )
        .prop_map(
            |(id, prompt, max_tokens, seed, logprobs, arrival, so, priority, salt)| {
                let mut sampling = SamplingParams::new(max_tokens);
                sampling.seed = seed;
                sampling.logprobs = logprobs;
                sampling.structured_outputs = so;
                EngineCoreRequest {
                    request_id: id,
                    prompt_token_ids: prompt,
                    sampling_params: sampling,
                    arrival_time: arrival,
                    priority,
                    cache_salt: salt,
                    pooling_params: None,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode::<EngineOutputs>(&bytes);
        let _ = decode::<EngineCoreRequest>(&bytes);
        let _ = decode::<AbortRequests>(&bytes);
        let _ = decode::<SchedulerStats>(&bytes);
    }

    #[test]
    fn outputs_round_trip(message in outputs()) {
        let bytes = encode(&message).unwrap();
        prop_assert_eq!(decode::<EngineOutputs>(&bytes).unwrap(), message);
    }

    #[test]
    fn requests_round_trip(message in request()) {
        let bytes = encode(&message).unwrap();
        prop_assert_eq!(decode::<EngineCoreRequest>(&bytes).unwrap(), message);
    }

    #[test]
    fn damaged_messages_are_refused_or_consistent(
        message in outputs(),
        cut in any::<prop::sample::Index>(),
        flip in any::<prop::sample::Index>(),
        mask in 1u8..=255,
        extra in prop::collection::vec(any::<u8>(), 1..4),
    ) {
        let bytes = encode(&message).unwrap();
        // Cut short: never the same message (a prefix cannot hold all of it).
        let short = &bytes[..cut.index(bytes.len())];
        prop_assert!(decode::<EngineOutputs>(short).is_err());
        // Extended: trailing bytes are an error.
        let mut long = bytes.clone();
        long.extend_from_slice(&extra);
        prop_assert!(decode::<EngineOutputs>(&long).is_err());
        // A flipped byte: refused, or a valid message that encodes back to itself.
        // Compared as bytes: a flip may make a float NaN, which is never equal to itself.
        let mut flipped = bytes.clone();
        let at = flip.index(flipped.len());
        flipped[at] ^= mask;
        if let Ok(decoded) = decode::<EngineOutputs>(&flipped) {
            let again = encode(&decoded).unwrap();
            let third = encode(&decode::<EngineOutputs>(&again).unwrap()).unwrap();
            prop_assert_eq!(third, again);
        }
    }
}
