use serde_json::json;

use super::*;

fn fields(body: Value) -> ExtraFields {
    serde_json::from_value(body).unwrap()
}

fn refused(body: Value) -> (String, String) {
    match check(fields(body.clone()), 2048, false) {
        Err(ApiError::BadRequest {
            param: Some(param),
            message,
        }) => (param, message),
        other => panic!("{body}: {other:?}"),
    }
}

#[test]
fn nothing_asked_is_the_default() {
    assert_eq!(
        check(fields(json!({})), 2048, false).unwrap(),
        Extras::default()
    );
    let nulls = json!({"return_token_ids": null, "truncate_prompt_tokens": null,
                       "reasoning_effort": null, "include_reasoning": null,
                       "separate_reasoning": null});
    assert_eq!(
        check(fields(nulls), 2048, false).unwrap(),
        Extras::default()
    );
    let all = json!({"return_token_ids": true, "return_tokens_as_token_ids": true,
                     "include_reasoning": false, "separate_reasoning": false,
                     "reasoning_effort": "xhigh"});
    let got = check(fields(all), 2048, false).unwrap();
    assert!(got.token_ids && got.ids_as_tokens);
    assert!(!got.include_reasoning && !got.separate_reasoning);
    assert_eq!(got.reasoning_effort.as_deref(), Some("xhigh"));
}

#[test]
fn truncation_takes_minus_one_up_to_the_context_and_a_side() {
    let of = |body: Value, left: bool| {
        let got = check(fields(body), 2048, left).unwrap();
        (got.truncate, got.truncate_left)
    };
    assert_eq!(
        of(json!({"truncate_prompt_tokens": -1}), false),
        (Some(2047), false)
    );
    assert_eq!(
        of(json!({"truncate_prompt_tokens": 2048}), false),
        (Some(2048), false)
    );
    assert_eq!(
        of(json!({"truncate_prompt_tokens": 0}), true),
        (Some(0), true)
    );
    let side = |s: &str| json!({"truncate_prompt_tokens": 5, "truncation_side": s});
    assert_eq!(of(side("left"), false), (Some(5), true));
    assert_eq!(of(side("right"), true), (Some(5), false));
    // The same words as tests/server/test_extras.py.
    assert_eq!(
        refused(json!({"truncate_prompt_tokens": -2})),
        (
            "truncate_prompt_tokens".into(),
            "`truncate_prompt_tokens` must be -1 (the context length less one) or at least 0, \
             got -2"
                .into()
        )
    );
    assert_eq!(
        refused(json!({"truncate_prompt_tokens": 2049})),
        (
            "truncate_prompt_tokens".into(),
            "`truncate_prompt_tokens` 2049 cannot be greater than max_model_len = 2048; \
             request a smaller truncation size"
                .into()
        )
    );
    assert_eq!(
        refused(side("middle")),
        (
            "truncation_side".into(),
            "`truncation_side` must be `left` or `right`, got `middle`".into()
        )
    );
}

#[test]
fn reasoning_effort_takes_vllms_values() {
    for effort in REASONING_EFFORTS {
        let got = check(fields(json!({ "reasoning_effort": effort })), 2048, false).unwrap();
        assert_eq!(got.reasoning_effort.as_deref(), Some(effort));
    }
    assert_eq!(
        refused(json!({"reasoning_effort": "extreme"})),
        (
            "reasoning_effort".into(),
            "`reasoning_effort` must be one of `none`, `minimal`, `low`, `medium`, `high`, \
             `xhigh`, `max`, got `extreme`"
                .into()
        )
    );
}

#[test]
fn the_effort_reaches_the_template_as_vllm_gives_it() {
    let kwargs = |user: Value, effort: Option<&str>| {
        Value::Object(template_kwargs(
            user.as_object().cloned().unwrap_or_default(),
            effort,
        ))
    };
    assert_eq!(
        kwargs(json!({}), Some("low")),
        json!({"reasoning_effort": "low", "enable_thinking": true})
    );
    assert_eq!(
        kwargs(json!({"reasoning_effort": "high", "x": 1}), Some("none")),
        json!({"reasoning_effort": "none", "enable_thinking": false, "x": 1})
    );
    // The request's own enable_thinking stays, whatever its value.
    assert_eq!(
        kwargs(json!({"enable_thinking": null}), Some("high")),
        json!({"reasoning_effort": "high", "enable_thinking": null})
    );
    assert_eq!(
        kwargs(json!({"reasoning_effort": "high"}), None),
        json!({"reasoning_effort": "high"})
    );
}

#[test]
fn truncation_keeps_the_first_or_the_last_tokens() {
    let extras = |keep: Option<usize>, left: bool| Extras {
        truncate: keep,
        truncate_left: left,
        ..Extras::default()
    };
    let ids = [1, 2, 3, 4, 5];
    assert_eq!(truncated(&ids, &extras(Some(2), false)), Some(vec![1, 2]));
    assert_eq!(truncated(&ids, &extras(Some(2), true)), Some(vec![4, 5]));
    assert_eq!(truncated(&ids, &extras(Some(0), true)), Some(vec![]));
    assert_eq!(truncated(&ids, &extras(Some(5), false)), None);
    assert_eq!(truncated(&ids, &extras(Some(9), true)), None);
    assert_eq!(truncated(&ids, &extras(None, true)), None);
}
