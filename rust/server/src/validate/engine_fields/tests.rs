use super::*;
use crate::openai::CommonFields;
use crate::parsers::reasoning::markers_of;
use crate::validate::params::{fields, validate};
use serde_json::json;

fn tokenizer() -> Tokenizer {
    let dir = crate::testutil::tiny_model_dir();
    crate::text::load_text(dir.path(), None).unwrap().0
}

fn server<'a>(tok: &'a Tokenizer, policy: &'a str, reasoning: Option<&'static str>) -> Server<'a> {
    Server {
        scheduling_policy: Some(policy),
        reasoning_parser: reasoning,
        tokenizer: tok,
    }
}

/// `body` through the shared checks, then these fields.
fn applied(body: Value, server: &Server<'_>) -> Result<Settings, ApiError> {
    let common: CommonFields = fields(&body)?;
    let mut settings = validate(common, None, false, 11)?;
    apply(&body, &mut settings, server)?;
    Ok(settings)
}

fn refusal(body: Value, server: &Server<'_>) -> (String, String) {
    match applied(body, server) {
        Err(ApiError::BadRequest {
            param: Some(param),
            message,
        }) => (param, message),
        other => panic!("expected a 400 naming a field, got {other:?}"),
    }
}

#[test]
fn each_field_names_itself_in_its_errors() {
    let tok = tokenizer();
    let fcfs = server(&tok, "fcfs", Some("qwen3"));
    let priority = server(&tok, "priority", Some("qwen3"));
    let cases = [
        (
            json!({"priority": 1}),
            &fcfs,
            "priority",
            "Priority scheduling is not enabled",
        ),
        (
            json!({"priority": -3}),
            &fcfs,
            "priority",
            "Got priority -3",
        ),
        (
            json!({"priority": 1.5}),
            &priority,
            "priority",
            "must be an integer",
        ),
        (
            json!({"priority": true}),
            &priority,
            "priority",
            "must be an integer",
        ),
        (
            json!({"priority": "1"}),
            &priority,
            "priority",
            "must be an integer",
        ),
        (
            json!({"priority": 9_223_372_036_854_775_808u64}),
            &priority,
            "priority",
            "must be an integer",
        ),
        (
            json!({"cache_salt": ""}),
            &fcfs,
            "cache_salt",
            "non-empty string",
        ),
        (
            json!({"cache_salt": 5}),
            &fcfs,
            "cache_salt",
            "non-empty string",
        ),
        (
            json!({"cache_salt": "a/b"}),
            &fcfs,
            "cache_salt",
            "at most 128",
        ),
        (
            json!({"cache_salt": "x".repeat(129)}),
            &fcfs,
            "cache_salt",
            "at most 128",
        ),
        (
            json!({"kv_transfer_params": [1]}),
            &fcfs,
            "kv_transfer_params",
            "object",
        ),
        (
            json!({"vllm_xargs": [1]}),
            &fcfs,
            "vllm_xargs",
            "must be an object",
        ),
        (
            json!({"vllm_xargs": {"a": null}}),
            &fcfs,
            "vllm_xargs",
            "`a` is another value",
        ),
        (
            json!({"vllm_xargs": {"a": {"b": 1}}}),
            &fcfs,
            "vllm_xargs",
            "`a` is another",
        ),
        (
            json!({"vllm_xargs": {"a": [1, [2]]}}),
            &fcfs,
            "vllm_xargs",
            "`a` holds another",
        ),
        (
            json!({"thinking_token_budget": -2}),
            &fcfs,
            "thinking_token_budget",
            "-1 for",
        ),
        (
            json!({"thinking_token_budget": 1.0}),
            &fcfs,
            "thinking_token_budget",
            "integer",
        ),
        (
            json!({"thinking_token_budget": false}),
            &fcfs,
            "thinking_token_budget",
            "integer",
        ),
    ];
    for (body, server, param, words) in cases {
        let (got, message) = refusal(body.clone(), server);
        assert_eq!(got, param, "{body}");
        assert!(message.contains(words), "{body}: {message}");
    }
}

#[test]
fn a_budget_needs_a_reasoning_parser_and_no_grammar() {
    let tok = tokenizer();
    let none = server(&tok, "fcfs", None);
    let (param, message) = refusal(json!({"thinking_token_budget": 5}), &none);
    assert_eq!(param, "thinking_token_budget");
    assert!(message.contains("--reasoning-parser"), "{message}");
    // -1 is vLLM's "unlimited": no budget, so no parser needed.
    let settings = applied(json!({"thinking_token_budget": -1}), &none).unwrap();
    assert_eq!(settings.sampling.thinking_budget, None);

    let qwen3 = server(&tok, "fcfs", Some("qwen3"));
    let common: CommonFields = fields(&json!({})).unwrap();
    let mut settings = validate(common, None, false, 11).unwrap();
    settings.constraint = Some("response_format");
    let err = apply(&json!({"thinking_token_budget": 3}), &mut settings, &qwen3).unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot be combined with `response_format`"),
        "{err}"
    );
}

#[test]
fn a_budget_carries_the_parsers_markers_tokenized() {
    let tok = tokenizer();
    let granite = server(&tok, "fcfs", Some("granite"));
    let settings = applied(json!({"thinking_token_budget": 7}), &granite).unwrap();
    let budget = settings.sampling.thinking_budget.unwrap();
    assert_eq!(budget.budget, 7);
    let markers = markers_of("granite").unwrap();
    let encode = |texts: &[&str]| -> Vec<Vec<u32>> {
        texts
            .iter()
            .map(|t| tok.encode(t, false).unwrap())
            .collect()
    };
    assert_eq!(budget.start_token_ids, encode(markers.start));
    assert_eq!(budget.end_token_ids, encode(markers.end));
    assert_eq!(
        budget.start_token_ids.len(),
        2,
        "every start marker of the format"
    );
    // Beyond the wire's u32: as good as unlimited, clamped.
    let big = applied(json!({"thinking_token_budget": 1u64 << 40}), &granite).unwrap();
    assert_eq!(big.sampling.thinking_budget.unwrap().budget, u32::MAX);
}

#[test]
fn priority_and_salt_go_to_the_engine_request() {
    let tok = tokenizer();
    let priority = server(&tok, "priority", None);
    let settings = applied(json!({"priority": -9, "cache_salt": "tenant-1"}), &priority).unwrap();
    assert_eq!(settings.priority, -9);
    assert_eq!(settings.cache_salt.as_deref(), Some("tenant-1"));
    // fcfs takes priority 0 (vLLM's default), and the render service (no policy) any.
    let fcfs = server(&tok, "fcfs", None);
    assert_eq!(applied(json!({"priority": 0}), &fcfs).unwrap().priority, 0);
    let render = Server {
        scheduling_policy: None,
        reasoning_parser: None,
        tokenizer: &tok,
    };
    assert_eq!(
        applied(json!({"priority": 4}), &render).unwrap().priority,
        4
    );
    let salt = "ß".repeat(128); // characters, not bytes
    let settings = applied(json!({"cache_salt": salt}), &fcfs).unwrap();
    assert_eq!(settings.cache_salt, Some(salt));
}

#[test]
fn xargs_and_kv_transfer_params_become_extra_args_in_vllms_order() {
    let tok = tokenizer();
    let fcfs = server(&tok, "fcfs", None);
    let body = json!({
        "vllm_xargs": {"b": "s", "kv_transfer_params": 1, "a": [1, "x", 2.5], "t": true},
        "kv_transfer_params": {"do_remote_prefill": false, "ids": [1, 2]}
    });
    let extra = applied(body, &fcfs).unwrap().sampling.extra_args.unwrap();
    let kv = rmpv::Value::Map(vec![
        ("do_remote_prefill".into(), false.into()),
        ("ids".into(), rmpv::Value::Array(vec![1.into(), 2.into()])),
    ]);
    let expected = rmpv::Value::Map(vec![
        ("b".into(), "s".into()),
        ("kv_transfer_params".into(), kv), // in the xargs entry's place
        (
            "a".into(),
            rmpv::Value::Array(vec![1.into(), "x".into(), 2.5f64.into()]),
        ),
        ("t".into(), 1.into()), // a boolean is an integer to vLLM's validation
    ]);
    assert_eq!(extra, expected);
    // Nothing, or an empty kv_transfer_params alone: no extra args.
    assert_eq!(applied(json!({}), &fcfs).unwrap().sampling.extra_args, None);
    let empty = json!({"kv_transfer_params": {}, "vllm_xargs": {}});
    assert_eq!(applied(empty, &fcfs).unwrap().sampling.extra_args, None);
}
