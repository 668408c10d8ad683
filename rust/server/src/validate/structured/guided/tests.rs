use serde_json::json;

use super::*;
use crate::validate::params::validate;
use crate::validate::structured::apply;

const SCHEMA: &str = r#"{"type":"object","properties":{"名前":{"type":"string"}}}"#;

fn schema() -> Value {
    serde_json::from_str(SCHEMA).unwrap()
}

/// The body's checked constraint (name, spec) through `apply`, as serving does.
fn applied(body: Value) -> Result<(Option<&'static str>, Option<StructuredOutputsOf>), ApiError> {
    let mut settings = validate(Default::default(), None, false, 1000).unwrap();
    apply(&body, &mut settings)?;
    Ok((settings.constraint, settings.sampling.structured_outputs))
}

type StructuredOutputsOf = vrs_wire::StructuredOutputs;

fn refused(body: Value) -> (String, String) {
    match applied(body.clone()) {
        Err(ApiError::BadRequest {
            param: Some(param),
            message,
        }) => (param, message),
        other => panic!("{body}: {other:?}"),
    }
}

#[test]
fn guided_fields_stand_for_their_structured_outputs_key() {
    let spec = |f: fn(&mut StructuredOutputsOf)| {
        let mut s = StructuredOutputsOf::default();
        f(&mut s);
        s
    };
    let cases = [
        (
            json!({"guided_json": schema()}),
            "guided_json",
            spec(|s| s.json = Some(SCHEMA.to_owned())),
        ),
        (
            json!({"guided_json": SCHEMA}),
            "guided_json",
            spec(|s| s.json = Some(SCHEMA.to_owned())),
        ),
        (
            json!({"guided_regex": "a+"}),
            "guided_regex",
            spec(|s| s.regex = Some("a+".to_owned())),
        ),
        (
            json!({"guided_choice": ["a", "b"]}),
            "guided_choice",
            spec(|s| s.choice = Some(vec!["a".to_owned(), "b".to_owned()])),
        ),
        (
            json!({"guided_grammar": "root ::= \"a\""}),
            "guided_grammar",
            spec(|s| s.grammar = Some("root ::= \"a\"".to_owned())),
        ),
    ];
    for (mut body, name, want) in cases {
        body["guided_decoding_backend"] = json!("outlines");
        let (got_name, got) = applied(body.clone()).unwrap();
        assert_eq!((got_name, got), (Some(name), Some(want)), "{body}");
    }
    for (field, _) in FIELDS {
        assert_eq!(applied(json!({ field: null })).unwrap(), (None, None));
    }
    // A text response_format asks for nothing; the backend alone constrains nothing.
    let body = json!({"guided_regex": "a", "response_format": {"type": "text"}});
    assert_eq!(applied(body).unwrap().0, Some("guided_regex"));
    let body = json!({"guided_decoding_backend": "xgrammar"});
    assert_eq!(applied(body).unwrap(), (None, None));
}

#[test]
fn guided_errors_name_the_guided_field() {
    // The same words as tests/server/test_structured.py.
    let cases = [
        (
            json!({"guided_json": "x"}),
            "guided_json",
            "`guided_json` must be a JSON Schema (an object, or a string holding one)",
        ),
        (
            json!({"guided_regex": 1}),
            "guided_regex",
            "`guided_regex` must be a string",
        ),
        (
            json!({"guided_choice": []}),
            "guided_choice",
            "`guided_choice` must be a non-empty list of strings",
        ),
        (
            json!({"guided_grammar": ""}),
            "guided_grammar",
            "`guided_grammar` must be a non-empty string (EBNF)",
        ),
        (
            json!({"guided_regex": "a", "guided_whitespace_pattern": "\\s"}),
            "guided_whitespace_pattern",
            "`guided_whitespace_pattern` is not supported",
        ),
        (
            json!({"guided_whitespace_pattern": "x"}),
            "guided_whitespace_pattern",
            "`guided_whitespace_pattern` is not supported",
        ),
        (
            json!({"guided_json": schema(), "guided_regex": "a"}),
            "guided_regex",
            "only one structured-output constraint may be given; this request sets \
             `guided_json` and `guided_regex`",
        ),
        (
            json!({"guided_regex": "a", "response_format": {"type": "json_object"}}),
            "guided_regex",
            "`guided_regex` cannot be combined with `response_format`: `guided_regex` is \
             vLLM's removed name of `structured_outputs.regex`; send one constraint",
        ),
        (
            json!({"guided_choice": ["a"], "response_format": {"type": "xml"}}),
            "guided_choice",
            "`guided_choice` cannot be combined with `response_format`: `guided_choice` is \
             vLLM's removed name of `structured_outputs.choice`; send one constraint",
        ),
        (
            json!({"guided_json": schema(), "structured_outputs": {"regex": "a"}}),
            "guided_json",
            "`guided_json` cannot be combined with `structured_outputs`: `guided_json` is \
             vLLM's removed name of `structured_outputs.json`; send one constraint",
        ),
        (
            json!({"guided_decoding_backend": 1}),
            "guided_decoding_backend",
            "`guided_decoding_backend` must be a string",
        ),
    ];
    for (body, param, message) in cases {
        assert_eq!(
            refused(body.clone()),
            (param.to_owned(), message.to_owned()),
            "{body}"
        );
    }
}

#[test]
fn the_deprecation_is_logged_once_per_process() {
    constraint(&json!({"guided_regex": "a"})).unwrap();
    assert!(WARNED.load(Ordering::Relaxed));
    // Later requests find it set: the warning is not repeated.
    constraint(&json!({"guided_decoding_backend": "xgrammar"})).unwrap();
    assert!(WARNED.load(Ordering::Relaxed));
}
