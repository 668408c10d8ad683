//! vLLM's request extensions as the render route shows them: `reasoning_effort` (and the
//! Responses API's `reasoning.effort`) in the template's variables, the messages' fields
//! sent back by the openai SDK, and `truncate_prompt_tokens`.

use super::*;

/// Prints each message's content and reasoning under both names, then the effort
/// variables.
const TEMPLATE: &str = "{% for m in messages %}{{ m.content }}{% if m.reasoning %}[{{ \
                        m.reasoning }}|{{ m.reasoning_content }}]{% endif %} {% endfor %}\
                        {{ reasoning_effort }}/{{ enable_thinking }}";

async fn prompt(f: &Fixture, body: Value) -> String {
    let (status, out) = call(f, "POST", "/v1/chat/completions/render", body).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    out["prompt"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn reasoning_effort_is_the_templates_as_vllm_gives_it() {
    let f = fixture_with(Some(TEMPLATE));
    let hello = json!([{"role": "user", "content": "hello"}]);
    let with = |fields: Value| {
        let mut body = json!({"messages": hello});
        body.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        body
    };
    assert_eq!(prompt(&f, with(json!({}))).await, "hello /");
    assert_eq!(
        prompt(&f, with(json!({"reasoning_effort": "low"}))).await,
        "hello low/True"
    );
    assert_eq!(
        prompt(&f, with(json!({"reasoning_effort": "none"}))).await,
        "hello none/False"
    );
    let kwargs = json!({"reasoning_effort": "high",
                        "chat_template_kwargs": {"enable_thinking": "mine", "reasoning_effort": "x"}});
    assert_eq!(prompt(&f, with(kwargs)).await, "hello high/mine");
    let body = json!({"input": "hello", "reasoning": {"effort": "max"}});
    let (status, out) = call(&f, "POST", "/v1/responses/render", body).await;
    assert_eq!(
        (status, out["prompt"].as_str()),
        (StatusCode::OK, Some("hello max/True"))
    );
}

#[tokio::test]
async fn messages_sent_back_reach_the_template_as_vllm_gives_them() {
    let f = fixture_with(Some(TEMPLATE));
    let messages = json!([
        {"role": "user", "content": "hello", "reasoning": "not given"},
        {"role": "assistant", "content": "world", "refusal": "no", "annotations": [],
         "audio": {"id": "a"}, "function_call": {"name": "f", "arguments": "{}"},
         "reasoning": "new", "reasoning_content": "old"},
        {"role": "assistant", "content": "foo", "refusal": null, "annotations": null,
         "audio": null, "function_call": null, "reasoning_content": "bar"},
    ]);
    assert_eq!(
        prompt(&f, json!({"messages": messages})).await,
        "hello world[new|new] foo[bar|bar] /"
    );
}

#[tokio::test]
async fn truncation_cuts_the_prompt_the_engine_would_get() {
    let f = fixture();
    let completion = |fields: Value| {
        let mut body = json!({"prompt": "hello world foo bar"});
        body.as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        body
    };
    let left = json!({"truncate_prompt_tokens": 2, "truncation_side": "left"});
    let (status, out) = call(&f, "POST", "/v1/completions/render", completion(left)).await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["prompt_token_ids"], json!([5, 6]));
    assert_eq!(out["prompt"], Value::Null, "the text no longer matches");
    assert_eq!(out["sampling_params"]["max_tokens"], MAX_MODEL_LEN - 2);
    let right = json!({"truncate_prompt_tokens": 2});
    let (_, out) = call(&f, "POST", "/v1/completions/render", completion(right)).await;
    assert_eq!(out["prompt_token_ids"], json!([3, 4]));
    let uncut = json!({"truncate_prompt_tokens": 4});
    let (_, out) = call(&f, "POST", "/v1/completions/render", completion(uncut)).await;
    assert_eq!(out["prompt"], "hello world foo bar");
    let chat = json!({"messages": [{"role": "user", "content": "hello world"}],
                      "truncate_prompt_tokens": 3, "truncation_side": "left"});
    let (_, out) = call(&f, "POST", "/v1/chat/completions/render", chat).await;
    assert_eq!(out["prompt_token_ids"], json!([3, 4, 10]));
}
