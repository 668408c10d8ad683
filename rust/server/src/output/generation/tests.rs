use super::*;
use crate::testutil::Harness;
use std::sync::Arc;
use std::time::Duration;
use vrs_engine_client::fake::{FAILING_REGEX, INVALID_MESSAGE, INVALID_REGEX};
use vrs_wire::{EngineCoreRequest, SamplingParams, StructuredOutputs};

const PROMPT: [u32; 2] = [3, 4]; // "hello world"

fn start(h: &Harness, id: &str, sampling: SamplingParams, stop: &[&str]) -> Generation {
    let request = EngineCoreRequest {
        request_id: id.into(),
        prompt_token_ids: PROMPT.to_vec(),
        sampling_params: sampling,
        arrival_time: 0.0,
        priority: 0,
        cache_salt: None,
        pooling_params: None,
    };
    let handle = h.client.submit(request).unwrap();
    let stop: Vec<String> = stop.iter().map(|s| (*s).to_owned()).collect();
    let observer = Observer::new(Arc::clone(&h.state.metrics), std::time::Instant::now(), 1);
    Generation::new(
        handle,
        &h.state.tokenizer,
        &PROMPT,
        true,
        &stop,
        PROMPT.len(),
        observer,
    )
    .unwrap()
}

/// All text, the finish reason (or the error).
async fn run(mut g: Generation) -> (String, Result<&'static str, ApiError>, Usage) {
    let mut text = String::new();
    loop {
        let piece = tokio::time::timeout(Duration::from_secs(5), g.next())
            .await
            .unwrap();
        match piece {
            Some(Ok(Piece {
                text: t,
                finish: None,
                ..
            })) => {
                assert!(!t.is_empty(), "text pieces are never empty");
                text.push_str(&t);
            }
            Some(Ok(Piece {
                text: t,
                finish: Some(reason),
                ..
            })) => {
                text.push_str(&t);
                assert!(g.next().await.is_none(), "nothing after the finish");
                return (text, Ok(reason), g.usage());
            }
            Some(Err(e)) => {
                assert!(g.next().await.is_none(), "nothing after a failure");
                return (text, Err(e), g.usage());
            }
            None => panic!("ended without a finish"),
        }
    }
}

#[tokio::test]
async fn text_and_usage_follow_the_tokens() {
    let h = Harness::start(vec![5, 6, 8], Duration::ZERO);
    let (text, reason, usage) = run(start(&h, "a", SamplingParams::new(4), &[])).await;
    assert_eq!(text, " foo bar baz foo");
    assert_eq!(reason.unwrap(), "length");
    assert_eq!(usage, Usage::new(2, 4));
}

#[tokio::test]
async fn stop_string_ends_the_text_and_aborts_the_engine() {
    let h = Harness::start(vec![5, 7, 6, 6], Duration::from_millis(5));
    let (text, reason, usage) = run(start(&h, "s", SamplingParams::new(50), &["STOP"])).await;
    assert_eq!(text, " foo ");
    assert_eq!(reason.unwrap(), "stop");
    assert_eq!(
        usage.completion_tokens, 2,
        "tokens up to the one completing the stop string"
    );
    assert!(
        h.engine.wait_for(|e| e.aborted() == ["s"]),
        "the engine is told to stop"
    );
}

#[tokio::test]
async fn stop_string_across_tokens() {
    let h = Harness::start(vec![5, 6, 8], Duration::ZERO);
    let (text, reason, _) = run(start(&h, "x", SamplingParams::new(50), &["o bar b"])).await;
    assert_eq!(text, " fo");
    assert_eq!(reason.unwrap(), "stop");
}

#[tokio::test]
async fn the_last_piece_names_the_stop_string_that_ended_it() {
    let h = Harness::start(vec![5, 6, 8], Duration::ZERO);
    let mut g = start(&h, "q", SamplingParams::new(50), &["zzz", "o bar b"]);
    let mut last = None;
    while let Some(piece) = g.next().await {
        let piece = piece.unwrap();
        assert!(piece.finish.is_some() || piece.stop_sequence.is_none());
        last = Some(piece);
    }
    let last = last.unwrap();
    assert_eq!(last.finish, Some("stop"));
    assert_eq!(last.stop_sequence.as_deref(), Some("o bar b"));
    // Without a stop string, no piece names one.
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let mut g = start(&h, "r", SamplingParams::new(2), &["zzz"]);
    while let Some(piece) = g.next().await {
        assert_eq!(piece.unwrap().stop_sequence, None);
    }
}

#[tokio::test]
async fn stop_token_is_counted_but_not_shown() {
    let h = Harness::start(vec![5, 6, 8], Duration::ZERO);
    let mut sampling = SamplingParams::new(50);
    sampling.stop_token_ids = vec![8];
    let (text, reason, usage) = run(start(&h, "t", sampling, &[])).await;
    assert_eq!(text, " foo bar");
    assert_eq!(reason.unwrap(), "stop");
    assert_eq!(usage.completion_tokens, 3);
    assert!(h.engine.aborted().is_empty());
}

#[tokio::test]
async fn engine_death_is_a_failure_piece() {
    let h = Harness::start(vec![5], Duration::from_millis(10));
    let g = start(&h, "d", SamplingParams::new(10_000), &[]);
    h.engine
        .kill
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (_, reason, _) = run(g).await;
    assert_eq!(reason.unwrap_err().status().as_u16(), 503);
}

#[tokio::test]
async fn dropping_an_unfinished_generation_aborts() {
    let h = Harness::start(vec![5], Duration::from_millis(10));
    let mut g = start(&h, "gone", SamplingParams::new(10_000), &[]);
    assert!(matches!(
        g.next().await,
        Some(Ok(Piece { finish: None, .. }))
    ));
    drop(g);
    assert!(h.engine.wait_for(|e| e.aborted() == ["gone"]));
}

fn regex(pattern: &str) -> SamplingParams {
    let mut sampling = SamplingParams::new(10);
    sampling.structured_outputs = Some(StructuredOutputs {
        regex: Some(pattern.into()),
        ..Default::default()
    });
    sampling
}

#[tokio::test]
async fn a_refused_spec_is_a_400_naming_the_constraint() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let g =
        start(&h, "bad", regex(INVALID_REGEX), &[]).constraint(Some("structured_outputs.regex"));
    let (text, reason, usage) = run(g).await;
    assert_eq!((text.as_str(), usage.completion_tokens), ("", 0));
    assert_eq!(
        reason.unwrap_err(),
        ApiError::bad("structured_outputs.regex", INVALID_MESSAGE)
    );
    for (pattern, constraint) in [
        // The engine's own failure stays a 500, constraint or not.
        (FAILING_REGEX, Some("structured_outputs.regex")),
        // An invalid_request kind with no constraint named: nothing to blame, a 500.
        (INVALID_REGEX, None),
    ] {
        let g = start(&h, pattern, regex(pattern), &[]).constraint(constraint);
        let err = run(g).await.1.unwrap_err();
        assert_eq!(err.status().as_u16(), 500, "{pattern}: {err:?}");
    }
    // An echo-only request maps the same way.
    let g = start(&h, "echo", regex(INVALID_REGEX), &[])
        .echo_only(true)
        .constraint(Some("response_format"));
    assert_eq!(
        run(g).await.1.unwrap_err(),
        ApiError::bad("response_format", INVALID_MESSAGE)
    );
}

#[test]
fn stop_token_hidden_only_when_last() {
    let mut out = EngineCoreOutput {
        request_id: "r".into(),
        new_token_ids: vec![5, 8],
        finish_reason: Some("stop".into()),
        stop_token_id: Some(8),
        new_logprobs: None,
        num_cached_tokens: 0,
        error_message: None,
        prompt_logprobs: None,
        queue_time: None,
        prefill_time: None,
        error_kind: None,
        decode_time: None,
        pooling_output: None,
    };
    assert_eq!(visible_ids(&out), &[5]);
    out.stop_token_id = None;
    assert_eq!(visible_ids(&out), &[5, 8]);
    out.stop_token_id = Some(5);
    assert_eq!(visible_ids(&out), &[5, 8]);
}
