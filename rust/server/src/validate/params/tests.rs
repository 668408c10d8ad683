use super::*;
use crate::openai::{ChatFields, CompletionFields, PromptInput};
use serde_json::json;

fn map(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

fn common(v: Value) -> Result<Settings, ApiError> {
    let c: CommonFields = fields(&v)?;
    validate(c, None, false, 1000)
}

fn param_of(e: ApiError) -> Option<String> {
    match e {
        ApiError::BadRequest { param, .. } => param,
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[test]
fn body_must_be_a_json_object() {
    assert!(parse_object(b"{\"a\": 1}").is_ok());
    for body in [&b""[..], b"  ", b"{", b"[1]", b"\"x\"", b"{\"a\": }"] {
        let e = parse_object(body).unwrap_err();
        assert_eq!(e.status().as_u16(), 400, "{body:?}");
    }
    assert!(parse_object(b"{")
        .unwrap_err()
        .to_string()
        .contains("invalid JSON"));
}

#[test]
fn unknown_keys_are_named() {
    let m = map(json!({"model": "m", "messages": [], "frobnicate": 1}));
    let e = check_keys(&m, Endpoint::Chat).unwrap_err();
    assert_eq!(e.to_string(), "unknown field `frobnicate`");
    assert_eq!(param_of(e).as_deref(), Some("frobnicate"));
    let m = map(json!({"zz": 1, "aa": 2}));
    let e = check_keys(&m, Endpoint::Completions).unwrap_err();
    assert_eq!(e.to_string(), "unknown fields: `aa`, `zz`");
    // Chat-only keys are unknown to completions and the reverse.
    assert!(check_keys(&map(json!({"messages": []})), Endpoint::Completions).is_err());
    assert!(check_keys(&map(json!({"prompt": "x"})), Endpoint::Chat).is_err());
}

#[test]
fn unsupported_features_are_refused_unless_neutral() {
    let refused = [
        (
            Endpoint::Completions,
            json!({"best_of": 3}),
            "`best_of` > 1 is not supported",
        ),
        (
            Endpoint::Chat,
            json!({"function_call": "auto"}),
            "`function_call` is not supported",
        ),
        (
            Endpoint::Completions,
            json!({"suffix": "x"}),
            "`suffix` is not supported",
        ),
        (
            Endpoint::Chat,
            json!({"functions": [{}]}),
            "`functions` is not supported",
        ),
    ];
    for (endpoint, body, message) in refused {
        let e = check_keys(&map(body.clone()), endpoint).unwrap_err();
        assert_eq!(e.to_string(), message, "{body}");
        let key = body.as_object().unwrap().keys().next().unwrap().clone();
        assert_eq!(param_of(e), Some(key));
    }
    let neutral = [
        (
            Endpoint::Chat,
            json!({"n": 1, "logprobs": false, "top_logprobs": null, "tools": [],
            "tool_choice": "none", "response_format": {"type": "text"}, "logit_bias": {},
            "echo": false, "best_of": null}),
        ),
        (
            Endpoint::Completions,
            json!({"n": null, "logprobs": null, "echo": false, "suffix": null,
            "best_of": 1, "guided_json": null, "guided_regex": null}),
        ),
    ];
    for (endpoint, body) in neutral {
        check_keys(&map(body), endpoint).unwrap();
    }
    // Implemented since #21: plain keys of both endpoints.
    for endpoint in [Endpoint::Chat, Endpoint::Completions] {
        let body = json!({"echo": true, "prompt_logprobs": 2, "logit_bias": {"1": 5},
                          "allowed_token_ids": [1], "bad_words": ["x"]});
        check_keys(&map(body), endpoint).unwrap();
    }
    // Structured outputs pass the key policy on both endpoints (`validate::structured`
    // checks their values after the sampling fields).
    for endpoint in [Endpoint::Chat, Endpoint::Completions] {
        let body = json!({"response_format": {"type": "json_object"},
                          "structured_outputs": "not checked here"});
        check_keys(&map(body), endpoint).unwrap();
    }
    // Chat-only features are plain unknown fields on completions.
    let e = check_keys(&map(json!({"tools": []})), Endpoint::Completions).unwrap_err();
    assert_eq!(e.to_string(), "unknown field `tools`");
    // Implemented features pass the key policy (their values are checked later).
    let chat = json!({"n": 3, "logprobs": true, "top_logprobs": 2, "tools": [{}],
                      "tool_choice": "required", "parallel_tool_calls": false});
    check_keys(&map(chat), Endpoint::Chat).unwrap();
    check_keys(
        &map(json!({"n": 2, "logprobs": 3, "echo": true})),
        Endpoint::Completions,
    )
    .unwrap();
}

#[test]
fn n_values() {
    assert_eq!(common(json!({})).unwrap().n, 1);
    assert_eq!(common(json!({"n": 128})).unwrap().n, 128);
    for bad in [0, -1, 129] {
        let e = common(json!({"n": bad})).unwrap_err();
        assert_eq!(e.to_string(), format!("`n` must be in [1, 128], got {bad}"));
        assert_eq!(param_of(e).as_deref(), Some("n"));
    }
}

#[test]
fn wrong_types_name_the_field() {
    let e = common(json!({"temperature": "hot"})).unwrap_err();
    assert!(e.to_string().contains("`temperature`"), "{e}");
    assert_eq!(param_of(e).as_deref(), Some("temperature"));
    let e = common(json!({"stop_token_ids": [1, -2]})).unwrap_err();
    assert_eq!(param_of(e).as_deref(), Some("stop_token_ids[1]"));
    let e = common(json!({"stop": 5})).unwrap_err();
    assert!(
        e.to_string().contains("a string or a list of strings"),
        "{e}"
    );
    let e = common(json!({"stream_options": {"include_usage": true, "x": 1}})).unwrap_err();
    assert!(param_of(e).unwrap().starts_with("stream_options"));
    let e =
        fields::<ChatFields>(&json!({"messages": [{"role": "user", "content": 3}]})).unwrap_err();
    assert_eq!(param_of(e).as_deref(), Some("messages[0].content"));
    let e = fields::<CompletionFields>(&json!({"prompt": {"a": 1}})).unwrap_err();
    assert_eq!(param_of(e).as_deref(), Some("prompt"));
    let ok = fields::<CompletionFields>(&json!({"prompt": [1, 2, 3]})).unwrap();
    assert_eq!(ok.prompt, Some(PromptInput::Tokens(vec![1, 2, 3])));
}

#[test]
fn bad_values_name_the_field() {
    let cases = [
        (json!({"max_tokens": -1}), "max_tokens"),
        (json!({"max_tokens": 0}), "max_tokens"),
        (json!({"temperature": -0.5}), "temperature"),
        (json!({"top_p": 0}), "top_p"),
        (json!({"top_p": 1.5}), "top_p"),
        (json!({"top_k": -2}), "top_k"),
        (json!({"min_p": 2}), "min_p"),
        (json!({"presence_penalty": 3}), "presence_penalty"),
        (json!({"frequency_penalty": -2.5}), "frequency_penalty"),
        (json!({"repetition_penalty": 0}), "repetition_penalty"),
        (json!({"min_tokens": -1}), "min_tokens"),
        (json!({"min_tokens": 5, "max_tokens": 4}), "min_tokens"),
        (json!({"stop_token_ids": [1000]}), "stop_token_ids"),
        (json!({"stop": ["a", ""]}), "stop"),
        (
            json!({"stream_options": {"include_usage": true}}),
            "stream_options",
        ),
    ];
    for (body, field) in cases {
        let e = common(body.clone()).unwrap_err();
        assert!(e.to_string().contains(field), "{body}: {e}");
        assert_eq!(param_of(e).as_deref(), Some(field), "{body}");
    }
}

#[test]
fn good_values_reach_the_sampling_params() {
    let g = common(json!({
        "model": "m", "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": -1,
        "min_p": 0.1, "seed": -3, "stop": "END", "stop_token_ids": [5], "ignore_eos": true,
        "min_tokens": 2, "presence_penalty": 0.5, "frequency_penalty": -0.5,
        "repetition_penalty": 1.1, "skip_special_tokens": false, "stream": true,
        "stream_options": {"include_usage": true}, "user": "u1"
    }))
    .unwrap();
    assert_eq!(g.max_tokens, Some(7));
    let s = &g.sampling;
    assert_eq!(
        (s.temperature, s.top_p, s.top_k, s.min_p),
        (0.0, 0.5, 0, 0.1)
    );
    assert_eq!(s.seed, Some(-3));
    assert_eq!(s.stop_token_ids, vec![5]);
    assert!(s.ignore_eos);
    assert_eq!(s.min_tokens, 2);
    assert_eq!(
        (
            s.presence_penalty,
            s.frequency_penalty,
            s.repetition_penalty
        ),
        (0.5, -0.5, 1.1)
    );
    assert_eq!(g.stop, vec!["END".to_string()]);
    assert!(!g.skip_special_tokens && g.stream && g.include_usage);
    assert_eq!(g.user.as_deref(), Some("u1"));
    let defaults = common(json!({})).unwrap();
    assert_eq!(defaults.sampling, SamplingParams::new(0));
    assert!(defaults.skip_special_tokens && !defaults.stream && !defaults.include_usage);
}

#[test]
fn max_completion_tokens_overrides() {
    let c: CommonFields = fields(&json!({"max_tokens": 9})).unwrap();
    let g = validate(c, Some(("max_completion_tokens", 3)), false, 10).unwrap();
    assert_eq!(g.max_tokens, Some(3));
    assert_eq!(g.max_tokens_field, "max_completion_tokens");
    let c: CommonFields = fields(&json!({"max_tokens": 9})).unwrap();
    assert_eq!(
        validate(c, None, false, 10).unwrap().max_tokens_field,
        "max_tokens"
    );
    let c: CommonFields = fields(&json!({})).unwrap();
    let e = validate(c, Some(("max_completion_tokens", 0)), false, 10).unwrap_err();
    assert_eq!(param_of(e).as_deref(), Some("max_completion_tokens"));
    // 0 only where allowed (completions with echo).
    let c: CommonFields = fields(&json!({"max_tokens": 0})).unwrap();
    assert_eq!(validate(c, None, true, 10).unwrap().max_tokens, Some(0));
    let c: CommonFields = fields(&json!({"max_tokens": 0})).unwrap();
    let e = validate(c, None, false, 10).unwrap_err();
    assert_eq!(param_of(e).as_deref(), Some("max_tokens"));
    // continuous usage only with include_usage.
    let g = common(json!({"stream": true, "stream_options":
        {"include_usage": true, "continuous_usage_stats": true}}))
    .unwrap();
    assert!(g.continuous_usage);
    let g = common(json!({"stream": true, "stream_options": {"continuous_usage_stats": true}}))
        .unwrap();
    assert!(!g.continuous_usage && !g.include_usage);
}

#[test]
fn max_tokens_against_the_context() {
    assert_eq!(
        resolve_max_tokens(None, "max_tokens", 10, 100, "prompt").unwrap(),
        90
    );
    assert_eq!(
        resolve_max_tokens(Some(90), "max_tokens", 10, 100, "prompt").unwrap(),
        90
    );
    let e = resolve_max_tokens(Some(91), "max_tokens", 10, 100, "messages").unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("maximum context length is 100") && text.contains("101"),
        "{text}"
    );
    assert!(
        text.contains("10 in the messages, 91 in the completion"),
        "{text}"
    );
    assert_eq!(param_of(e).as_deref(), Some("max_tokens"));
    let e = resolve_max_tokens(None, "max_tokens", 100, 100, "prompt").unwrap_err();
    assert!(e.to_string().contains("100 input tokens"), "{e}");
    assert_eq!(param_of(e).as_deref(), Some("prompt"));
    assert!(resolve_max_tokens(None, "max_tokens", 0, 100, "prompt").is_err());
    // Over the context via max_completion_tokens: the error names that field.
    let e = resolve_max_tokens(Some(91), "max_completion_tokens", 10, 100, "messages");
    let e = e.unwrap_err();
    assert!(
        e.to_string().contains("maximum context length is 100"),
        "{e}"
    );
    assert_eq!(param_of(e).as_deref(), Some("max_completion_tokens"));
}
