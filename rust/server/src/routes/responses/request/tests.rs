use serde_json::{json, Value};

use super::*;

fn chat(body: Value) -> Value {
    Value::Object(translate(body.to_string().as_bytes()).unwrap().chat)
}

fn refused(body: Value) -> (String, String) {
    match translate(body.to_string().as_bytes()) {
        Err(ApiError::BadRequest {
            message,
            param: Some(param),
        }) => (param, message),
        other => panic!("{body}: {other:?}"),
    }
}

#[test]
fn a_string_input_is_one_user_message_after_the_instructions() {
    let got = chat(
        json!({"model": "m", "input": "hi", "instructions": "be brief",
                          "max_output_tokens": 5, "temperature": 0, "top_p": 0.5, "max_tool_calls": null,
                          "stop": ["x"], "seed": 1, "top_k": 3, "user": "u", "stream": true,
                          "parallel_tool_calls": false, "store": false,
                          "service_tier": "auto", "prompt_cache_key": "k",
                          "safety_identifier": "s", "metadata": {"a": "b"},
                          "stream_options": {"include_obfuscation": false}}),
    );
    assert_eq!(
        got,
        json!({"messages": [{"role": "system", "content": "be brief"},
                            {"role": "user", "content": "hi"}],
               "model": "m", "parallel_tool_calls": false, "temperature": 0, "top_p": 0.5,
               "stop": ["x"], "seed": 1, "top_k": 3, "user": "u", "stream": true,
               "max_completion_tokens": 5})
    );
}

#[test]
fn items_become_chat_messages() {
    let input = json!([
        {"role": "developer", "content": "sys"},
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "think"}]},
        {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
         "content": [{"type": "output_text", "text": "ok", "annotations": [], "logprobs": []}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{\"x\":1}"},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "function_call_output", "call_id": "c2",
         "output": [{"type": "input_text", "text": "t"}, {"type": "input_text", "text": "u"}]},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "ignored"}]},
        {"type": "function_call", "call_id": "c3", "name": "f", "arguments": ""},
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "last"}]},
    ]);
    let call = |id: &str, name: &str, args: &str| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}});
    assert_eq!(
        chat(json!({"input": input}))["messages"],
        json!([
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
             "reasoning_content": "think", "tool_calls": [call("c1", "f", "{}"), call("c2", "g", "{\"x\":1}")]},
            {"role": "tool", "tool_call_id": "c1", "content": "one"},
            {"role": "tool", "tool_call_id": "c2", "content": "tu"},
            {"role": "assistant", "tool_calls": [call("c3", "f", "")],
             "reasoning_content": ""},
            {"role": "assistant", "content": "", "reasoning_content": "last"},
        ])
    );
}

#[test]
fn reasoning_waits_for_the_next_assistant_message() {
    let input = json!([
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "r"},
                                          {"type": "reasoning_text", "text": "s"}]},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
        {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "t"}]},
    ]);
    assert_eq!(
        chat(json!({"input": input}))["messages"],
        json!([{"role": "user", "content": "hi"},
               {"role": "assistant", "content": "yo", "reasoning_content": "rs"},
               {"role": "assistant", "content": "", "reasoning_content": "t"}])
    );
}

#[test]
fn tools_choice_format_and_effort_translate() {
    let got = chat(json!({
        "input": "x",
        "tools": [{"type": "function", "name": "f", "strict": true,
                   "parameters": {"type": "object"}, "description": "d"},
                  {"type": "function", "name": "g"}],
        "tool_choice": {"type": "function", "name": "f"},
        "text": {"format": {"type": "json_schema", "strict": true, "name": "n",
                            "schema": {"type": "object"}}, "verbosity": "medium"},
        "reasoning": {"effort": "low", "summary": "auto"},
    }));
    assert_eq!(
        got["tools"],
        json!([{"type": "function", "function": {"name": "f", "description": "d",
                "parameters": {"type": "object"}, "strict": true}},
               {"type": "function", "function": {"name": "g"}}])
    );
    let keys: Vec<&String> = got["tools"][0]["function"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(keys, ["name", "description", "parameters", "strict"]);
    assert_eq!(
        got["tool_choice"],
        json!({"type": "function", "function": {"name": "f"}})
    );
    assert_eq!(
        got["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "n",
               "schema": {"type": "object"}, "strict": true}})
    );
    // The chat field, which applies vLLM's rule (a template that reads no effort is
    // rendered without it, as vLLM does: no refusal).
    assert_eq!(got["reasoning_effort"], json!("low"));
    assert!(got.get("chat_template_kwargs").is_none());
    for choice in ["auto", "none", "required"] {
        assert_eq!(
            chat(json!({"input": "x", "tool_choice": choice}))["tool_choice"],
            choice
        );
    }
    let got = chat(json!({"input": "x", "text": {"format": {"type": "json_object"}}}));
    assert_eq!(got["response_format"], json!({"type": "json_object"}));
    let got = chat(json!({"input": "x", "text": {"format": {"type": "text"}},
                          "reasoning": {"effort": null}}));
    assert!(got.get("response_format").is_none() && got.get("chat_template_kwargs").is_none());
}

#[test]
fn the_echo_has_defaults_and_the_given_values() {
    let t = translate(br#"{"input": "x"}"#).unwrap();
    assert_eq!(
        t.echo,
        Echo {
            instructions: Value::Null,
            max_output_tokens: Value::Null,
            parallel_tool_calls: json!(true),
            reasoning: json!({"effort": null, "summary": null}),
            temperature: json!(1.0),
            text: json!({"format": {"type": "text"}}),
            tool_choice: json!("auto"),
            tools: json!([]),
            top_p: json!(1.0),
            user: Value::Null,
            metadata: json!({}),
            top_logprobs: json!(0),
            request_id: None,
            response_messages: false,
        }
    );
    let body = json!({"input": "x", "instructions": "i", "max_output_tokens": 9,
                      "temperature": 0.5, "tools": [{"type": "function", "name": "f"}],
                      "text": {"format": {"type": "json_object"}}, "metadata": {"k": "v"},
                      "reasoning": {"summary": "concise"}, "tool_choice": "none", "user": "u"});
    let t = translate(body.to_string().as_bytes()).unwrap();
    assert_eq!(t.echo.instructions, "i");
    assert_eq!(t.echo.max_output_tokens, 9);
    assert_eq!(t.echo.temperature, 0.5);
    assert_eq!(t.echo.tools, body["tools"]);
    assert_eq!(t.echo.text, json!({"format": {"type": "json_object"}}));
    assert_eq!(
        t.echo.reasoning,
        json!({"effort": null, "summary": "concise"})
    );
    assert_eq!(
        (t.echo.tool_choice, t.echo.user),
        (json!("none"), json!("u"))
    );
    assert_eq!(t.echo.metadata, json!({"k": "v"}));
}

#[test]
fn every_refusal_names_its_field() {
    let image = json!([{"role": "user", "content": [{"type": "input_image", "image_url": "u"}]}]);
    let call = json!({"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"});
    let cases = [
        (json!({"input": "x", "store": 1}), "store",
         "invalid value for 'store': expected a boolean"),
        (json!({"input": "x", "previous_response_id": 5}), "previous_response_id",
         "invalid value for 'previous_response_id': expected a string"),
        (json!({"input": "x", "background": true, "store": false}), "background",
         "background can only be used when `store` is true"),
        (json!({"input": "x", "background": true, "store": null}), "background",
         "background can only be used when `store` is true"),
        (json!({"input": "x", "conversation": "c"}), "conversation",
         "conversation is not supported"),
        (json!({"input": "x", "prompt": {"id": "p"}}), "prompt",
         "prompt is not supported"),
        (json!({"input": "x", "include": ["reasoning.encrypted_content", "message.output_text.text"]}),
         "include[1]", "invalid value for 'include[1]': expected one of code_interpreter_call.outputs, \
          computer_call_output.output.image_url, file_search_call.results, \
          message.input_image.image_url, message.output_text.logprobs, reasoning.encrypted_content"),
        (json!({"input": "x", "include": "message.output_text.logprobs"}), "include",
         "invalid value for 'include': expected an array"),
        (json!({"input": "x", "truncation": "auto"}), "truncation",
         "truncation 'auto' is not supported: only 'disabled'"),
        (json!({"input": "x", "top_logprobs": 21}), "top_logprobs",
         "invalid value for 'top_logprobs': expected an integer from 0 to 20"),
        (json!({"input": "x", "top_logprobs": -1}), "top_logprobs",
         "invalid value for 'top_logprobs': expected an integer from 0 to 20"),
        (json!({"input": "x", "top_logprobs": 2.0}), "top_logprobs",
         "invalid value for 'top_logprobs': expected an integer from 0 to 20"),
        (json!({"input": "x", "max_tool_calls": 3}), "max_tool_calls",
         "max_tool_calls is not supported"),
        (json!({"input": "x", "service_tier": 1}), "service_tier",
         "invalid value for 'service_tier': expected a string"),
        (json!({"input": "x", "bogus": 1, "store": true}), "bogus", "unknown field 'bogus'"),
        (json!({"input": "x", "messages": []}), "messages", "unknown field 'messages'"),
        (json!({"model": "m"}), "input", "'input' is required"),
        (json!({"input": 3}), "input", "invalid value for 'input': expected an array"),
        (json!({"input": image}), "input[0].content[0].type",
         "content part type 'input_image' is not supported"),
        (json!({"input": [{"role": "user", "content": "x"}, {"role": 1, "content": "x"}]}),
         "input[1].role", "invalid value for 'input[1].role': expected a string"),
        (json!({"input": [{"role": "tool", "content": "x"}]}), "input[0].role",
         "invalid value for 'input[0].role': expected one of user, system, developer, assistant"),
        (json!({"input": [{"role": "user"}]}), "input[0].content",
         "invalid value for 'input[0].content': expected an array"),
        (json!({"input": [{"type": null, "role": "user", "content": "x"}]}), "input[0].type",
         "expected a string"),
        (json!({"input": [{"type": "item_reference", "id": "x"}]}), "input[0].type",
         "input item type 'item_reference' is not supported"),
        (json!({"input": [{"type": "function_call_output", "call_id": "c9", "output": "o"}]}),
         "input[0].call_id", "function_call_output for unknown call_id 'c9'"),
        (json!({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}),
         "input[0].arguments", "invalid value for 'input[0].arguments': expected a string"),
        (json!({"input": [call, {"type": "function_call_output", "call_id": "c",
                                 "output": [{"type": "input_image"}]}]}),
         "input[1].output[0].type", "content part type 'input_image' is not supported"),
        (json!({"input": [{"type": "reasoning", "content": [{"type": "summary_text", "text": "t"}]}]}),
         "input[0].content[0].type", "content part type 'summary_text' is not supported"),
        (json!({"input": [{"type": "reasoning", "summary": "s"}]}), "input[0].summary",
         "expected an array"),
        (json!({"input": "x", "instructions": 5}), "instructions",
         "invalid value for 'instructions': expected a string"),
        (json!({"input": "x", "tools": [{"type": "web_search"}]}), "tools[0].type",
         "built-in tool 'web_search' is not supported: only function tools"),
        (json!({"input": "x", "tools": [{"type": "function"}]}), "tools[0].name",
         "expected a string"),
        (json!({"input": "x", "tools": {}}), "tools", "expected an array"),
        (json!({"input": "x", "tool_choice": "any"}), "tool_choice",
         "invalid value for 'tool_choice': expected 'auto', 'none', 'required' or {\"type\": \"function\", \"name\": ...}"),
        (json!({"input": "x", "tool_choice": {"type": "web_search"}}), "tool_choice",
         "expected 'auto'"),
        (json!({"input": "x", "max_output_tokens": 0}), "max_output_tokens",
         "invalid value for 'max_output_tokens': expected an integer >= 1"),
        (json!({"input": "x", "parallel_tool_calls": "yes"}), "parallel_tool_calls",
         "expected a boolean"),
        (json!({"input": "x", "user": 1}), "user", "expected a string"),
        (json!({"input": "x", "text": {"verbosity": "low"}}), "text.verbosity",
         "text.verbosity is not supported: only 'medium'"),
        (json!({"input": "x", "text": {"lang": "en"}}), "text.lang", "unknown field 'text.lang'"),
        (json!({"input": "x", "text": {"format": {"type": "grammar"}}}), "text.format.type",
         "text.format type 'grammar' is not supported: expected text, json_object or json_schema"),
        (json!({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}}),
         "text.format.schema", "expected an object"),
        (json!({"input": "x", "reasoning": {"summary": "long"}}), "reasoning.summary",
         "invalid value for 'reasoning.summary': expected one of auto, concise, detailed"),
        (json!({"input": "x", "reasoning": {"effort": 1}}), "reasoning.effort", "expected a string"),
        (json!({"input": "x", "reasoning": {"generate_summary": "auto"}}),
         "reasoning.generate_summary", "unknown field 'reasoning.generate_summary'"),
        (json!({"input": "x", "metadata": {"k": 1}}), "metadata.k", "expected a string"),
        (json!({"input": "x", "stream": "yes"}), "stream", "expected a boolean"),
        (json!({"input": "x", "stream_options": {"include_usage": true}}),
         "stream_options.include_usage", "unknown field 'stream_options.include_usage'"),
        (json!({"input": "x", "store": "yes"}), "store", "expected a boolean"),
        (json!({"input": [{"type": "reasoning", "summary": ""}]}), "input[0].summary",
         "expected an array"),
        (json!({"input": [{"type": "reasoning", "content": ""}]}), "input[0].content",
         "expected an array"),
    ];
    for (body, param, needle) in cases {
        let (got, message) = refused(body.clone());
        assert_eq!(got, param, "{body}: {message}");
        assert!(message.contains(needle), "{body}: {message}");
    }
    let many: serde_json::Map<String, Value> =
        (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    let (param, message) = refused(json!({"input": "x", "metadata": many}));
    assert_eq!(
        (param.as_str(), message.as_str()),
        ("metadata", "metadata has more than 16 keys")
    );
}

#[test]
fn neutral_values_of_refused_fields_pass() {
    let body = json!({"input": "x", "store": false, "previous_response_id": null,
                      "background": false, "conversation": null, "prompt": null,
                      "include": [], "truncation": "disabled", "top_logprobs": 0,
                      "max_tool_calls": null});
    assert!(translate(body.to_string().as_bytes()).is_ok());
}
