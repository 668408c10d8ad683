use serde_json::json;

use super::*;
use crate::parsers::tools::ToolFormat;
use crate::validate::params::validate;

/// (param, message) of a 400.
fn refusal(err: ApiError) -> (String, String) {
    match err {
        ApiError::BadRequest { param, message } => (param.unwrap_or_default(), message),
        other => panic!("expected a 400, got {other:?}"),
    }
}

fn of(body: Value) -> Result<Option<Constraint>, ApiError> {
    constraint(body.get("response_format"), body.get("structured_outputs"))
}

fn so(value: Value) -> Result<Option<Constraint>, ApiError> {
    of(json!({ "structured_outputs": value }))
}

fn error_of(body: Value) -> (String, String) {
    refusal(of(body.clone()).expect_err(&body.to_string()))
}

#[test]
fn no_constraint_is_free_text() {
    for body in [
        json!({}),
        json!({"response_format": null, "structured_outputs": null}),
        json!({"response_format": {"type": "text", "extra": 1}}),
    ] {
        assert_eq!(of(body).unwrap(), None);
    }
}

#[test]
fn response_format_json_object_and_json_schema() {
    let found = of(json!({"response_format": {"type": "json_object"}}))
        .unwrap()
        .unwrap();
    assert_eq!(found.name, "response_format");
    assert_eq!(
        found.spec,
        StructuredOutputs {
            json_object: true,
            ..Default::default()
        }
    );
    // Compact text, keys in the order given, non-ASCII as is; strict and extras ignored.
    let body = json!({"response_format": {"type": "json_schema", "extra": [1], "json_schema": {
        "name": "x", "strict": true, "description": null, "other": 1,
        "schema": {"type": "object", "required": ["名前"],
                   "properties": {"z": {"type": "integer", "maximum": 1.5}, "名前": {"type": "string"}}}}}});
    let found = of(body).unwrap().unwrap();
    assert_eq!(found.name, "response_format");
    assert_eq!(
        found.spec.json.as_deref(),
        Some(
            r#"{"type":"object","required":["名前"],"properties":{"z":{"type":"integer","maximum":1.5},"名前":{"type":"string"}}}"#
        )
    );
    assert_eq!(
        StructuredOutputs {
            json: None,
            ..found.spec
        },
        StructuredOutputs::default()
    );
    for strict in [json!(false), json!(null)] {
        let body = json!({"response_format": {"type": "json_schema",
            "json_schema": {"name": "n", "schema": {}, "strict": strict}}});
        assert_eq!(of(body).unwrap().unwrap().spec.json.as_deref(), Some("{}"));
    }
}

#[test]
fn response_format_errors_in_order() {
    let types = "the accepted types are `text`, `json_object` and `json_schema`";
    let cases = [
        (
            json!("json"),
            "response_format",
            format!("`response_format` must be an object with a string `type`; {types}"),
        ),
        (
            json!({"type": 1}),
            "response_format",
            format!("`response_format` must be an object with a string `type`; {types}"),
        ),
        (
            json!({}),
            "response_format",
            format!("`response_format` must be an object with a string `type`; {types}"),
        ),
        (
            json!({"type": "xml"}),
            "response_format",
            format!("`response_format` of type `xml` is not supported; {types}"),
        ),
        (
            json!({"type": "json_schema"}),
            "response_format.json_schema",
            "`response_format.json_schema` must be an object with `name` and `schema`".into(),
        ),
        (
            json!({"type": "json_schema", "json_schema": []}),
            "response_format.json_schema",
            "`response_format.json_schema` must be an object with `name` and `schema`".into(),
        ),
        // schema before name
        (
            json!({"type": "json_schema", "json_schema": {}}),
            "response_format.json_schema.schema",
            "`response_format.json_schema.schema` must be a JSON Schema object".into(),
        ),
        (
            json!({"type": "json_schema", "json_schema": {"name": "n", "schema": "{}"}}),
            "response_format.json_schema.schema",
            "`response_format.json_schema.schema` must be a JSON Schema object".into(),
        ),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {}}}),
            "response_format.json_schema.name",
            "`response_format.json_schema.name` must be a string".into(),
        ),
        (
            json!({"type": "json_schema", "json_schema": {"schema": {}, "name": 3}}),
            "response_format.json_schema.name",
            "`response_format.json_schema.name` must be a string".into(),
        ),
    ];
    for (value, param, message) in cases {
        let got = error_of(json!({ "response_format": value }));
        assert_eq!(got, (param.to_owned(), message), "{value}");
    }
}

#[test]
fn each_structured_outputs_kind() {
    let cases = [
        (
            json!({"json": {"b": 1, "a": [1, 2]}}),
            "structured_outputs.json",
            StructuredOutputs {
                json: Some(r#"{"b":1,"a":[1,2]}"#.into()),
                ..Default::default()
            },
        ),
        // A string holding a schema is parsed and re-serialized compactly.
        (
            json!({"json": "{ \"b\" : 1 ,\n \"a\": \"é\" }"}),
            "structured_outputs.json",
            StructuredOutputs {
                json: Some(r#"{"b":1,"a":"é"}"#.into()),
                ..Default::default()
            },
        ),
        (
            json!({"regex": "[a-z]+\\d"}),
            "structured_outputs.regex",
            StructuredOutputs {
                regex: Some("[a-z]+\\d".into()),
                ..Default::default()
            },
        ),
        (
            json!({"regex": ""}),
            "structured_outputs.regex",
            StructuredOutputs {
                regex: Some(String::new()),
                ..Default::default()
            },
        ),
        (
            json!({"choice": ["yes", "", "日本"]}),
            "structured_outputs.choice",
            StructuredOutputs {
                choice: Some(vec!["yes".into(), String::new(), "日本".into()]),
                ..Default::default()
            },
        ),
        (
            json!({"grammar": "root ::= \"a\""}),
            "structured_outputs.grammar",
            StructuredOutputs {
                grammar: Some("root ::= \"a\"".into()),
                ..Default::default()
            },
        ),
        (
            json!({"json_object": true, "regex": null}),
            "structured_outputs.json_object",
            StructuredOutputs {
                json_object: true,
                ..Default::default()
            },
        ),
        // Sent as given: the string unchanged.
        (
            json!({"structural_tag": "{ \"type\": \"x\" }"}),
            "structured_outputs.structural_tag",
            StructuredOutputs {
                structural_tag: Some("{ \"type\": \"x\" }".into()),
                ..Default::default()
            },
        ),
        // Accepted options change nothing.
        (
            json!({"regex": "a", "disable_fallback": false, "disable_any_whitespace": true,
                "disable_additional_properties": null, "whitespace_pattern": null}),
            "structured_outputs.regex",
            StructuredOutputs {
                regex: Some("a".into()),
                ..Default::default()
            },
        ),
    ];
    for (value, name, spec) in cases {
        let found = so(value.clone()).unwrap().unwrap();
        assert_eq!((found.name, found.spec), (name, spec), "{value}");
    }
}

#[test]
fn structured_outputs_errors() {
    let so_ = "structured_outputs";
    let none = "`structured_outputs` must set one of `json`, `regex`, `choice`, `grammar`, `json_object` or `structural_tag`";
    let json_msg =
        "`structured_outputs.json` must be a JSON Schema (an object, or a string holding one)";
    let cases: Vec<(Value, &str, String)> = vec![
        (json!("regex"), so_, "`structured_outputs` must be an object".into()),
        (json!([]), so_, "`structured_outputs` must be an object".into()),
        (json!({}), so_, none.into()),
        (json!({"json": null, "json_object": false, "disable_fallback": true}), so_, none.into()),
        // Unknown keys first, sorted.
        (json!({"zeta": 1, "alpha": 2, "json": 3}), "structured_outputs.alpha", "unknown field `alpha` in `structured_outputs`".into()),
        (json!({"json": 3}), "structured_outputs.json", json_msg.into()),
        (json!({"json": [1]}), "structured_outputs.json", json_msg.into()),
        (json!({"json": "not json"}), "structured_outputs.json", json_msg.into()),
        (json!({"json": "[1]"}), "structured_outputs.json", json_msg.into()),
        (json!({"regex": 1}), "structured_outputs.regex", "`structured_outputs.regex` must be a string".into()),
        (json!({"choice": []}), "structured_outputs.choice", "`structured_outputs.choice` must be a non-empty list of strings".into()),
        (json!({"choice": ["a", 1]}), "structured_outputs.choice", "`structured_outputs.choice` must be a non-empty list of strings".into()),
        (json!({"choice": "a"}), "structured_outputs.choice", "`structured_outputs.choice` must be a non-empty list of strings".into()),
        (json!({"grammar": ""}), "structured_outputs.grammar", "`structured_outputs.grammar` must be a non-empty string (EBNF)".into()),
        (json!({"grammar": 5}), "structured_outputs.grammar", "`structured_outputs.grammar` must be a non-empty string (EBNF)".into()),
        (json!({"json_object": "yes"}), "structured_outputs.json_object", "`structured_outputs.json_object` must be a boolean".into()),
        (json!({"json_object": 1}), "structured_outputs.json_object", "`structured_outputs.json_object` must be a boolean".into()),
        (json!({"structural_tag": {"type": "x"}}), "structured_outputs.structural_tag", "`structured_outputs.structural_tag` must be a string holding a JSON object".into()),
        (json!({"structural_tag": "[]"}), "structured_outputs.structural_tag", "`structured_outputs.structural_tag` must be a string holding a JSON object".into()),
        (json!({"regex": "a", "disable_fallback": "no"}), "structured_outputs.disable_fallback", "`structured_outputs.disable_fallback` must be a boolean".into()),
        (json!({"regex": "a", "disable_any_whitespace": false}), "structured_outputs.disable_any_whitespace", "`structured_outputs.disable_any_whitespace: false` is not supported: JSON is always generated without free whitespace".into()),
        (json!({"regex": "a", "disable_any_whitespace": 0}), "structured_outputs.disable_any_whitespace", "`structured_outputs.disable_any_whitespace` must be a boolean".into()),
        (json!({"regex": "a", "disable_additional_properties": false}), "structured_outputs.disable_additional_properties", "`structured_outputs.disable_additional_properties: false` is not supported: properties a schema does not name are never generated".into()),
        (json!({"regex": "a", "whitespace_pattern": " "}), "structured_outputs.whitespace_pattern", "`structured_outputs.whitespace_pattern` is not supported".into()),
        // The first error in key order wins: json before regex, kinds before options.
        (json!({"regex": 1, "json": 1}), "structured_outputs.json", json_msg.into()),
        (json!({"whitespace_pattern": "x", "grammar": ""}), "structured_outputs.grammar", "`structured_outputs.grammar` must be a non-empty string (EBNF)".into()),
        // The options are checked before "sets none".
        (json!({"whitespace_pattern": "x"}), "structured_outputs.whitespace_pattern", "`structured_outputs.whitespace_pattern` is not supported".into()),
    ];
    for (value, param, message) in cases {
        let got = refusal(so(value.clone()).expect_err(&value.to_string()));
        assert_eq!(got, (param.to_owned(), message), "{value}");
    }
}

#[test]
fn one_constraint_per_request() {
    let prefix = "only one structured-output constraint may be given; this request sets";
    let cases = [
        (json!({"response_format": {"type": "json_object"}, "structured_outputs": {"regex": "a"}}),
         "structured_outputs.regex", format!("{prefix} `response_format` and `structured_outputs.regex`")),
        (json!({"structured_outputs": {"structural_tag": "{}", "choice": ["a"], "json": {}}}),
         "structured_outputs.choice",
         format!("{prefix} `structured_outputs.json`, `structured_outputs.choice` and `structured_outputs.structural_tag`")),
        (json!({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {}}},
                "structured_outputs": {"json_object": true, "grammar": "g", "regex": "r"}}),
         "structured_outputs.regex",
         format!("{prefix} `response_format`, `structured_outputs.regex`, `structured_outputs.grammar` and `structured_outputs.json_object`")),
    ];
    for (body, param, message) in cases {
        assert_eq!(
            error_of(body.clone()),
            (param.to_owned(), message),
            "{body}"
        );
    }
    // A text response_format and a false json_object are no constraint.
    let body = json!({"response_format": {"type": "text"},
                      "structured_outputs": {"json_object": false, "regex": "a"}});
    assert_eq!(of(body).unwrap().unwrap().name, "structured_outputs.regex");
}

fn settings() -> Settings {
    validate(Default::default(), None, false, 100).unwrap()
}

fn tool_settings(mode: ToolMode, name: Option<&str>) -> ToolSettings {
    ToolSettings {
        tools: Some(vec![
            json!({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}),
        ]),
        mode,
        name: name.map(str::to_owned),
        parallel: true,
    }
}

const HERMES: ToolFormat = ToolFormat::Hermes;

#[test]
fn apply_sets_the_spec_and_its_name() {
    let mut s = settings();
    apply(&json!({"structured_outputs": {"choice": ["a"]}}), &mut s).unwrap();
    assert_eq!(s.constraint, Some("structured_outputs.choice"));
    assert_eq!(
        s.sampling.structured_outputs.unwrap().choice,
        Some(vec!["a".to_owned()])
    );
    let mut s = settings();
    apply(&json!({"response_format": {"type": "text"}}), &mut s).unwrap();
    assert_eq!((s.constraint, s.sampling.structured_outputs), (None, None));
}

#[test]
fn forcing_tool_choice_cannot_be_combined_with_a_constraint() {
    for (mode, name, text) in [
        (ToolMode::Required, None, "\"required\""),
        (ToolMode::Named, Some("f"), "naming `f`"),
    ] {
        let mut s = settings();
        apply(&json!({"response_format": {"type": "json_object"}}), &mut s).unwrap();
        let err = with_tools(&tool_settings(mode, name), Some(HERMES), &mut s).unwrap_err();
        assert_eq!(
            refusal(err),
            (
                "tool_choice".to_owned(),
                format!("`tool_choice` {text} cannot be combined with `response_format`")
            )
        );
    }
    let mut s = settings();
    apply(&json!({"structured_outputs": {"regex": "a"}}), &mut s).unwrap();
    let err = with_tools(
        &tool_settings(ToolMode::Named, Some("f")),
        Some(HERMES),
        &mut s,
    )
    .unwrap_err();
    assert_eq!(
        refusal(err).1,
        "`tool_choice` naming `f` cannot be combined with `structured_outputs.regex`"
    );
    // auto / none leave the constraint alone.
    for mode in [ToolMode::Auto, ToolMode::None] {
        with_tools(&tool_settings(mode, None), Some(HERMES), &mut s).unwrap();
        assert_eq!(s.constraint, Some("structured_outputs.regex"));
    }
}

#[test]
fn a_forced_call_is_constrained_by_its_tag() {
    let mut s = settings();
    with_tools(
        &tool_settings(ToolMode::Required, None),
        Some(HERMES),
        &mut s,
    )
    .unwrap();
    assert_eq!(s.constraint, Some(TOOLS));
    let spec = s.sampling.structured_outputs.unwrap();
    let tag: Value = serde_json::from_str(spec.structural_tag.as_deref().unwrap()).unwrap();
    assert_eq!(tag["type"], "structural_tag");
    assert_eq!(
        StructuredOutputs {
            structural_tag: None,
            ..spec
        },
        StructuredOutputs::default()
    );
    let mut s = settings();
    with_tools(&tool_settings(ToolMode::Auto, None), Some(HERMES), &mut s).unwrap();
    assert_eq!((s.constraint, s.sampling.structured_outputs), (None, None));
}
