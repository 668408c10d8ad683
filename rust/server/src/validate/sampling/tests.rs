use super::*;
use crate::openai::CommonFields;
use crate::validate::params::{fields, validate};
use serde_json::json;
use vrs_wire::SamplingParams;

fn tokenizer() -> Tokenizer {
    let dir = crate::testutil::tiny_model_dir();
    crate::text::load_text(dir.path(), None).unwrap().0
}

fn param_of(e: ApiError) -> Option<String> {
    match e {
        ApiError::BadRequest { param, .. } => param,
        other => panic!("expected a 400, got {other:?}"),
    }
}

fn settings(body: &Value) -> Result<Settings, ApiError> {
    let common: CommonFields = fields(body)?;
    let zero_ok = body.get("echo") == Some(&json!(true));
    validate(common, None, zero_ok, 11)
}

/// `body` through the sampling fields (tiny vocabulary of 11).
fn applied(body: Value, tok: &Tokenizer) -> Result<Settings, ApiError> {
    let mut g = settings(&body)?;
    apply(fields(&body)?, &mut g, tok, 11)?;
    Ok(g)
}

#[test]
fn each_field_names_itself_in_its_errors() {
    let tok = tokenizer();
    let cases = [
        (json!({"prompt_logprobs": 21}), "prompt_logprobs", "[0, 20]"),
        (json!({"prompt_logprobs": -1}), "prompt_logprobs", "[0, 20]"),
        (
            json!({"prompt_logprobs": "x"}),
            "prompt_logprobs",
            "prompt_logprobs",
        ),
        (
            json!({"logit_bias": [1]}),
            "logit_bias",
            "must be an object",
        ),
        (json!({"logit_bias": {"x": 1}}), "logit_bias", "\"x\""),
        (json!({"logit_bias": {"11": 1}}), "logit_bias", "\"11\""),
        (json!({"logit_bias": {"-1": 1}}), "logit_bias", "\"-1\""),
        (json!({"logit_bias": {"3": 101}}), "logit_bias", "101"),
        (json!({"logit_bias": {"3": "a"}}), "logit_bias", "\"a\""),
        (
            json!({"allowed_token_ids": []}),
            "allowed_token_ids",
            "empty",
        ),
        (json!({"allowed_token_ids": 3}), "allowed_token_ids", "list"),
        (
            json!({"allowed_token_ids": [3, 11]}),
            "allowed_token_ids",
            "11",
        ),
        (
            json!({"allowed_token_ids": [-1]}),
            "allowed_token_ids",
            "-1",
        ),
        (
            json!({"allowed_token_ids": [1.5]}),
            "allowed_token_ids",
            "1.5",
        ),
        (json!({"bad_words": "foo"}), "bad_words", "list of strings"),
        (
            json!({"bad_words": ["foo", 3]}),
            "bad_words",
            "list of strings",
        ),
    ];
    for (body, param, words) in cases {
        let e = applied(body.clone(), &tok).unwrap_err();
        assert!(e.to_string().contains(words), "{body}: {e}");
        assert_eq!(param_of(e).as_deref(), Some(param), "{body}");
    }
}

#[test]
fn good_values_reach_the_sampling_params() {
    let tok = tokenizer();
    let g = applied(
        json!({"prompt_logprobs": 2, "logit_bias": {"7": -100, " 3": 2.5, "10": 100},
               "allowed_token_ids": [3, 4, 10], "bad_words": ["  foo bar", "baz", "baz"]}),
        &tok,
    )
    .unwrap();
    assert_eq!(g.prompt_logprobs, Some(2));
    assert_eq!(g.sampling.prompt_logprobs, Some(2));
    assert_eq!(
        g.sampling.logit_bias,
        vec![(3, 2.5), (7, -100.0), (10, 100.0)]
    );
    assert_eq!(g.sampling.allowed_token_ids, Some(vec![3, 4, 10]));
    // The word-level tokenizer splits on whitespace: both variants tokenize alike,
    // so each word gives one sequence, and a repeated word none.
    assert_eq!(g.sampling.bad_words_token_ids, vec![vec![5, 6], vec![8]]);
    let none = applied(
        json!({"prompt_logprobs": null, "logit_bias": null, "allowed_token_ids": null,
               "bad_words": null}),
        &tok,
    )
    .unwrap();
    assert_eq!(none.sampling, SamplingParams::new(0));
    assert_eq!(none.prompt_logprobs, None);
    // A word that tokenizes to nothing is dropped.
    let empty = applied(json!({"bad_words": ["", "   "]}), &tok).unwrap();
    assert!(empty.sampling.bad_words_token_ids.is_empty());
}

#[test]
fn chat_logprobs_values() {
    let chat = |v: Value| -> Result<Settings, ApiError> {
        let mut g = settings(&json!({}))?;
        chat_logprobs(&fields::<ChatFields>(&v)?, &mut g)?;
        Ok(g)
    };
    assert_eq!(
        chat(json!({"logprobs": true})).unwrap().sampling.logprobs,
        Some(0)
    );
    let g = chat(json!({"logprobs": true, "top_logprobs": 5})).unwrap();
    assert_eq!(g.sampling.logprobs, Some(5));
    assert_eq!(
        chat(json!({"logprobs": false, "top_logprobs": 0}))
            .unwrap()
            .sampling
            .logprobs,
        None
    );
    let e = chat(json!({"top_logprobs": 2})).unwrap_err();
    assert_eq!(e.to_string(), "`top_logprobs` needs `logprobs` set to true");
    let e = chat(json!({"logprobs": true, "top_logprobs": 21})).unwrap_err();
    assert_eq!(e.to_string(), "`top_logprobs` must be in [0, 20], got 21");
}

#[test]
fn completion_echo_and_logprobs() {
    let tok = tokenizer();
    let cmpl = |v: Value| -> Result<Settings, ApiError> {
        let mut g = applied(v.clone(), &tok)?;
        completion_output(&fields::<CompletionFields>(&v)?, &mut g)?;
        Ok(g)
    };
    assert_eq!(
        cmpl(json!({"logprobs": 0})).unwrap().sampling.logprobs,
        Some(0)
    );
    let g = cmpl(json!({"echo": true})).unwrap();
    assert!(g.echo && !g.echo_only);
    assert_eq!(g.sampling.prompt_logprobs, None);
    assert_eq!(
        param_of(cmpl(json!({"logprobs": -1})).unwrap_err()).as_deref(),
        Some("logprobs")
    );
    // echo + logprobs: the engine computes the prompt's logprobs, at least top k.
    let g = cmpl(json!({"echo": true, "logprobs": 3})).unwrap();
    assert_eq!(g.sampling.prompt_logprobs, Some(3));
    assert_eq!(g.prompt_logprobs, None);
    let g = cmpl(json!({"echo": true, "logprobs": 1, "prompt_logprobs": 4})).unwrap();
    assert_eq!(
        (g.sampling.prompt_logprobs, g.prompt_logprobs),
        (Some(4), Some(4))
    );
    let g = cmpl(json!({"echo": true, "logprobs": 5, "prompt_logprobs": 0})).unwrap();
    assert_eq!(
        (g.sampling.prompt_logprobs, g.prompt_logprobs),
        (Some(5), Some(0))
    );
    // Without echo, logprobs does not ask for the prompt's.
    let g = cmpl(json!({"logprobs": 2})).unwrap();
    assert_eq!(g.sampling.prompt_logprobs, None);
    // max_tokens 0: only with echo.
    let g = cmpl(json!({"echo": true, "max_tokens": 0})).unwrap();
    assert!(g.echo_only);
    let e = cmpl(json!({"max_tokens": 0})).unwrap_err();
    assert_eq!(param_of(e).as_deref(), Some("max_tokens"));
}
