//! The combinations a search refuses, one field at a time and in the check order; the
//! HTTP answers (both frontends) are in tests/request_cases/bad_requests.json.

use serde_json::{json, Value};

use super::*;
use crate::openai::CommonFields;
use crate::validate::params::{fields, validate, BeamSearch};

fn settings(extra: Value) -> Settings {
    let mut body = json!({"use_beam_search": true, "n": 2});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let common: CommonFields = fields(&body).unwrap();
    validate(common, None, true, 1000).unwrap()
}

fn refused_param(settings: &Settings, endpoint: Endpoint) -> Option<String> {
    match check(settings, endpoint) {
        Ok(()) => None,
        Err(ApiError::BadRequest { param, .. }) => param,
        Err(other) => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn beam_settings_come_from_n_and_length_penalty() {
    let s = settings(json!({"length_penalty": -0.5}));
    assert_eq!(
        s.beam_search,
        Some(BeamSearch {
            width: 2,
            length_penalty: -0.5
        })
    );
    assert_eq!(settings(json!({})).beam_search.unwrap().length_penalty, 1.0);
    let off: CommonFields = fields(&json!({"use_beam_search": false, "n": 3})).unwrap();
    assert_eq!(validate(off, None, false, 1000).unwrap().beam_search, None);
}

#[test]
fn neutral_values_and_sampling_knobs_pass() {
    let s = settings(json!({
        "temperature": 0.7, "top_p": 0.9, "top_k": 5, "min_p": 0.1, "seed": 3, "stop": [],
        "stop_token_ids": [], "min_tokens": 0, "presence_penalty": 0, "frequency_penalty": 0,
        "repetition_penalty": 1, "ignore_eos": true, "skip_special_tokens": false}));
    assert_eq!(refused_param(&s, Endpoint::Chat), None);
    assert_eq!(refused_param(&s, Endpoint::Completions), None);
    let s = settings(json!({"n": 10, "stream": true}));
    assert_eq!(refused_param(&s, Endpoint::Chat), None);
}

#[test]
fn each_field_is_named() {
    for (extra, param) in [
        (json!({"n": 11}), "n"),
        (json!({"stop": "x"}), "stop"),
        (json!({"stop_token_ids": [3]}), "stop_token_ids"),
        (json!({"min_tokens": 1}), "min_tokens"),
        (json!({"presence_penalty": 0.5}), "presence_penalty"),
        (json!({"frequency_penalty": -1}), "frequency_penalty"),
        (json!({"repetition_penalty": 1.2}), "repetition_penalty"),
    ] {
        let s = settings(extra.clone());
        assert_eq!(
            refused_param(&s, Endpoint::Chat).as_deref(),
            Some(param),
            "{extra}"
        );
    }
    let mut s = settings(json!({}));
    s.sampling.logprobs = Some(0);
    assert_eq!(
        refused_param(&s, Endpoint::Chat).as_deref(),
        Some("logprobs")
    );
    let mut s = settings(json!({}));
    s.constraint = Some("structured_outputs.regex");
    let param = refused_param(&s, Endpoint::Completions);
    assert_eq!(param.as_deref(), Some("structured_outputs.regex"));
}

#[test]
fn the_check_order() {
    // Streamed completions first, then n, then max_tokens 0, then the fields in order.
    let s = settings(json!({"stream": true, "n": 11, "stop": "x"}));
    assert_eq!(
        refused_param(&s, Endpoint::Completions).as_deref(),
        Some("stream")
    );
    assert_eq!(refused_param(&s, Endpoint::Chat).as_deref(), Some("n"));
    let mut s = settings(json!({"max_tokens": 0, "stop": "x"}));
    s.echo_only = true;
    assert_eq!(
        refused_param(&s, Endpoint::Completions).as_deref(),
        Some("max_tokens")
    );
    let s = settings(json!({"min_tokens": 1, "stop_token_ids": [3], "presence_penalty": 1}));
    assert_eq!(
        refused_param(&s, Endpoint::Chat).as_deref(),
        Some("stop_token_ids")
    );
    let err = check(&settings(json!({"stop": "x"})), Endpoint::Chat).unwrap_err();
    assert_eq!(err.to_string(), "`stop` is not supported with beam search");
}

#[test]
fn forced_tools_and_render_are_refused() {
    let s = settings(json!({}));
    assert!(check_tools(&s, None).is_ok());
    let err = check_tools(&s, Some("\"required\"")).unwrap_err();
    assert_eq!(
        err.to_string(),
        "`tool_choice` \"required\" is not supported with beam search"
    );
    let err = check_render(&s).unwrap_err();
    assert_eq!(err.to_string(), RENDER_REFUSAL);
    let plain: CommonFields = fields(&json!({})).unwrap();
    let plain = validate(plain, None, false, 1000).unwrap();
    assert!(check_tools(&plain, Some("\"required\"")).is_ok());
    assert!(check_render(&plain).is_ok());
}
