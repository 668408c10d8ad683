//! The request shapes agent clients send (Claude Code, the anthropic SDK): `output_config`,
//! adaptive thinking, `system` messages inside `messages`, `redacted_thinking`,
//! `cache_control` where Anthropic takes it. Mirrors
//! `tests/server/test_messages_client_shapes.py`.

use serde_json::{json, Value};

use super::*;

fn translated(body: &Value, mode: Mode, reasoning: bool, merge_system: bool) -> Value {
    let server = Server {
        reasoning,
        merge_system,
    };
    translate(body.to_string().as_bytes(), mode, server).unwrap_or_else(|e| panic!("{body}: {e:?}"))
}

fn chat(body: Value) -> Value {
    translated(&body, Mode::Create, true, true)
}

fn refused(body: Value) -> (String, String) {
    let server = Server {
        reasoning: true,
        merge_system: true,
    };
    match translate(body.to_string().as_bytes(), Mode::Create, server) {
        Err(ApiError::BadRequest { message, param }) => (param.unwrap_or_default(), message),
        other => panic!("{body}: {other:?}"),
    }
}

fn base(extra: Value) -> Value {
    let mut body = json!({"model": "m", "max_tokens": 4096,
                          "messages": [{"role": "user", "content": "hi"}]});
    for (key, value) in extra.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    body
}

#[test]
fn output_config_effort_goes_to_the_template() {
    let effort = base(json!({"output_config": {"effort": "high"}}));
    let on = json!({"reasoning_effort": "high", "enable_thinking": true});
    assert_eq!(chat(effort.clone())["chat_template_kwargs"], on);
    let mut adaptive = effort.clone();
    adaptive["thinking"] = json!({"type": "adaptive"});
    let out = translated(&adaptive, Mode::Create, false, true);
    assert_eq!(out["chat_template_kwargs"], on);
    let mut enabled = effort.clone();
    enabled["thinking"] = json!({"type": "enabled", "budget_tokens": 1024, "display": "omitted"});
    assert_eq!(chat(enabled)["chat_template_kwargs"], on);
    let mut disabled = effort;
    disabled["thinking"] = json!({"type": "disabled"});
    assert_eq!(
        chat(disabled)["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    let count = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                       "output_config": {"effort": "max"}});
    assert_eq!(
        translated(&count, Mode::CountTokens, true, true)["chat_template_kwargs"],
        json!({"reasoning_effort": "max", "enable_thinking": true})
    );
    let none = base(json!({"output_config": {"effort": null}}));
    assert!(chat(none).get("chat_template_kwargs").is_none());
}

#[test]
fn adaptive_thinking_pins_nothing() {
    for thinking in [
        json!({"type": "adaptive"}),
        json!({"type": "adaptive", "display": "summarized"}),
    ] {
        let body = base(json!({ "thinking": thinking }));
        assert_eq!(
            translated(&body, Mode::Create, false, true),
            json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                   "max_tokens": 4096})
        );
    }
}

#[test]
fn output_config_format_is_a_json_schema_response_format() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    for format in [
        json!({"type": "json_schema", "schema": schema}),
        json!({ "schema": schema }),
    ] {
        let out = chat(base(json!({"output_config": {"format": format}})));
        assert_eq!(
            out["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "json_schema",
                                                          "schema": schema}})
        );
        assert!(out.get("chat_template_kwargs").is_none());
    }
}

#[test]
fn system_messages_merge_into_the_system_prompt_or_stay() {
    let body = json!({"model": "m", "max_tokens": 4, "system": "top.", "messages": [
        {"role": "user", "content": "a"},
        {"role": "system", "content": [
            {"type": "text", "text": "mid", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "dle."}]},
        {"role": "assistant", "content": "b"},
        {"role": "system", "content": "last."}]});
    assert_eq!(
        translated(&body, Mode::Create, true, true)["messages"],
        json!([{"role": "system", "content": "top.middle.last."},
               {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])
    );
    assert_eq!(
        translated(&body, Mode::Create, true, false)["messages"],
        json!([{"role": "system", "content": "top."}, {"role": "user", "content": "a"},
               {"role": "system", "content": "middle."}, {"role": "assistant", "content": "b"},
               {"role": "system", "content": "last."}])
    );
    let inline_only = base(json!({"messages": [{"role": "user", "content": "a"},
                                               {"role": "system", "content": "s"}]}));
    assert_eq!(
        chat(inline_only)["messages"],
        json!([{"role": "system", "content": "s"}, {"role": "user", "content": "a"}])
    );
}

#[test]
fn the_billing_header_is_left_out_of_the_system_prompt() {
    let header = "x-anthropic-billing-header: cc_version=2.1; cch=abc123;";
    let body = base(json!({
        "system": [{"type": "text", "text": header},
                   {"type": "text", "text": "You are helpful.",
                    "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
        "messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": header},
                     {"role": "assistant", "content": "ok"}]}));
    for merge in [true, false] {
        assert_eq!(
            translated(&body, Mode::Create, true, merge)["messages"],
            json!([{"role": "system", "content": "You are helpful."},
                   {"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
        );
    }
    let kept = chat(base(json!({ "system": header })));
    assert_eq!(
        kept["messages"][0],
        json!({"role": "system", "content": header})
    );
    let empty = chat(base(json!({"system": ""})));
    assert_eq!(
        empty["messages"],
        json!([{"role": "user", "content": "hi"}])
    );
}

#[test]
fn redacted_thinking_is_accepted_and_renders_nothing() {
    let out = chat(base(json!({"messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"},
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "text", "text": "done"}]},
        {"role": "assistant", "content": [{"type": "redacted_thinking", "data": "x"}]}]})));
    assert_eq!(
        out["messages"],
        json!([{"role": "user", "content": "hi"},
               {"role": "assistant", "content": [{"type": "text", "text": "done"}],
                "reasoning_content": "t"},
               {"role": "assistant", "content": []}])
    );
}

#[test]
fn cache_control_everywhere_anthropic_takes_it() {
    let eph = json!({"type": "ephemeral"});
    let out = chat(base(json!({
        "cache_control": eph,
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "cache_control": eph}],
        "system": [{"type": "text", "text": "s", "cache_control": eph}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "q", "cache_control": eph}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {},
                 "cache_control": eph}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1",
                 "cache_control": {"type": "ephemeral", "ttl": "5m"},
                 "content": [{"type": "text", "text": "r", "cache_control": eph}]}]}]})));
    assert_eq!(
        out["messages"],
        json!([{"role": "system", "content": "s"},
               {"role": "user", "content": [{"type": "text", "text": "q"}]},
               {"role": "assistant", "tool_calls": [{"id": "toolu_1", "type": "function",
                                                     "function": {"name": "f",
                                                                  "arguments": "{}"}}]},
               {"role": "tool", "tool_call_id": "toolu_1", "content": "r"}])
    );
    assert_eq!(
        out["tools"],
        json!([{"type": "function", "function": {"name": "f",
                                                 "parameters": {"type": "object"}}}])
    );
    let null = chat(base(json!({ "cache_control": null })));
    assert_eq!(null["messages"], json!([{"role": "user", "content": "hi"}]));
}

#[test]
fn every_refusal_names_its_field() {
    let eph = json!({"type": "ephemeral"});
    let user = json!({"role": "user", "content": "hi"});
    let asst = |block: Value| json!({"messages": [user.clone(), {"role": "assistant", "content": [block]}]});
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            json!({"output_config": {"effort": "extreme"}}),
            "output_config.effort",
            "invalid value: expected 'low', 'medium', 'high', 'xhigh' or 'max', got 'extreme'",
        ),
        (
            json!({"output_config": {"effort": 3}}),
            "output_config.effort",
            "invalid value: expected a string",
        ),
        (
            json!({"output_config": {"task_budget": 5}}),
            "output_config.task_budget",
            "unknown field 'task_budget'",
        ),
        (
            json!({"output_config": "high"}),
            "output_config",
            "invalid value: expected an object",
        ),
        (
            json!({"output_config": {"format": {"type": "json_object"}}}),
            "output_config.format.type",
            "invalid value: expected 'json_schema', got 'json_object'",
        ),
        (
            json!({"output_config": {"format": {"type": "json_schema"}}}),
            "output_config.format.schema",
            "Field required",
        ),
        (
            json!({"output_config": {"format": {"schema": []}}}),
            "output_config.format.schema",
            "invalid value: expected an object",
        ),
        (
            json!({"output_config": {"format": {"schema": {}, "name": "x"}}}),
            "output_config.format.name",
            "unknown field 'name'",
        ),
        (
            json!({"thinking": {"type": "adaptive", "budget_tokens": 2048}}),
            "thinking.budget_tokens",
            "unknown field 'budget_tokens'",
        ),
        (
            json!({"thinking": {"type": "adaptive", "display": "full"}}),
            "thinking.display",
            "invalid value: expected 'summarized', 'omitted' or 'updates', got 'full'",
        ),
        (
            json!({"thinking": {"type": "disabled", "display": "omitted"}}),
            "thinking.display",
            "unknown field 'display'",
        ),
        (
            json!({"cache_control": {"type": "persistent"}}),
            "cache_control.type",
            "invalid value: expected 'ephemeral', got 'persistent'",
        ),
        (
            json!({"cache_control": {}}),
            "cache_control.type",
            "Field required",
        ),
        (
            json!({"cache_control": {"type": "ephemeral", "ttl": "1d"}}),
            "cache_control.ttl",
            "invalid value: expected '5m' or '1h', got '1d'",
        ),
        (
            json!({"cache_control": {"type": "ephemeral", "scope": "x"}}),
            "cache_control.scope",
            "unknown field 'scope'",
        ),
        (
            json!({"cache_control": true}),
            "cache_control",
            "invalid value: expected an object",
        ),
        (
            json!({"tools": [{"name": "f", "input_schema": {}, "cache_control": {"type": "x"}}]}),
            "tools[0].cache_control.type",
            "invalid value: expected 'ephemeral', got 'x'",
        ),
        (
            json!({"system": [{"type": "text", "text": "s", "cache_control": 1}]}),
            "system[0].cache_control",
            "invalid value: expected an object",
        ),
        (
            json!({"messages": [{"role": "system", "content": [{"type": "image"}]}, user]}),
            "messages[0].content[0].type",
            "content block type 'image' is not supported",
        ),
        (
            json!({"messages": [{"role": "system", "content": []}, user]}),
            "messages[0].content",
            "at least one content block is required",
        ),
        (
            json!({"messages": [{"role": "system", "content": 7}, user]}),
            "messages[0].content",
            "invalid value: expected a string or a list",
        ),
        (
            asst(json!({"type": "redacted_thinking"})),
            "messages[1].content[0].data",
            "Field required",
        ),
        (
            asst(json!({"type": "redacted_thinking", "data": "d", "signature": "s"})),
            "messages[1].content[0].signature",
            "unknown field 'signature'",
        ),
        (
            asst(json!({"type": "thinking", "thinking": "t", "cache_control": eph})),
            "messages[1].content[0].cache_control",
            "unknown field 'cache_control'",
        ),
        (
            asst(
                json!({"type": "tool_use", "id": "a", "name": "f", "input": {}, "cache_control": {"type": "ephemeral", "ttl": 5}}),
            ),
            "messages[1].content[0].cache_control.ttl",
            "invalid value: expected a string",
        ),
    ];
    for (extra, param, message) in cases {
        let body = base(extra);
        assert_eq!(
            refused(body.clone()),
            (param.to_owned(), message.to_owned()),
            "{body}"
        );
    }
}

#[test]
fn check_order_thinking_then_output_config_then_cache_control() {
    let mut body = base(
        json!({"cache_control": {}, "output_config": {"effort": "x"},
                               "thinking": {"type": "x"}}),
    );
    assert_eq!(refused(body.clone()).0, "thinking.type");
    body["thinking"] = Value::Null;
    assert_eq!(refused(body.clone()).0, "output_config.effort");
    body["output_config"] = Value::Null;
    assert_eq!(refused(body).0, "cache_control.type");
}

#[test]
fn chat_errors_of_the_format_name_output_config() {
    let cases = [
        ("response_format", "output_config.format"),
        (
            "response_format.json_schema.schema",
            "output_config.format.schema",
        ),
        ("response_format.json_schema", "output_config.format"),
        ("response_formats", "response_formats"),
        ("temperature", "temperature"),
    ];
    for (chat, ours) in cases {
        assert_eq!(messages_param(chat), ours, "{chat}");
    }
    assert_eq!(messages_field("response_format"), "output_config.format");
    assert_eq!(messages_field("tools"), "tools");
    assert_eq!(
        renamed(ApiError::bad("response_format.json_schema.schema", "m")),
        ApiError::bad("output_config.format.schema", "m")
    );
}
