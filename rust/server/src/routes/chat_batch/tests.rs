//! `/v1/chat/completions/batch` end to end (router + real engine client over ZMQ + fake
//! engine): one choice per conversation, usage over all of them, echo per conversation,
//! and the errors, each naming its field (`messages[i]…` inside conversation `i`).

use std::time::Duration;

use serde_json::{json, Value};

use crate::testutil::{call, json_of, Harness};

async fn post(h: &Harness, path: &str, body: &Value) -> (u16, Value) {
    let (status, _, bytes) = call(h, "POST", path, &body.to_string()).await;
    (status.as_u16(), json_of(&bytes))
}

fn user(text: &str) -> Value {
    json!([{"role": "user", "content": text}])
}

#[tokio::test]
async fn one_choice_per_conversation_and_the_usage_of_all() {
    let h = Harness::start(vec![6], Duration::ZERO);
    let batch = json!([user("hello"), user("hello foo foo"), user("foo")]);
    let body = json!({"messages": batch, "max_tokens": 2, "model": ""});
    let (status, v) = post(&h, "/v1/chat/completions/batch", &body).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["object"], "chat.completion");
    let choices = v["choices"].as_array().unwrap();
    let indexes: Vec<_> = choices
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indexes, [0, 1, 2]);
    assert!(choices
        .iter()
        .all(|c| c["message"]["content"] == " bar bar"));
    assert!(choices.iter().all(|c| c["finish_reason"] == "length"));
    let mut prompt = 0;
    for conversation in batch.as_array().unwrap() {
        let single = json!({"messages": conversation, "max_tokens": 1});
        let (_, alone) = post(&h, "/v1/chat/completions", &single).await;
        prompt += alone["usage"]["prompt_tokens"].as_u64().unwrap();
    }
    assert_eq!(v["usage"]["prompt_tokens"], prompt);
    assert_eq!(v["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn echo_is_each_conversations_own() {
    let h = Harness::start(vec![6], Duration::ZERO);
    let ending = json!([{"role": "user", "content": "hello"},
                        {"role": "assistant", "content": "foo"}]);
    let body = json!({"messages": [user("hello"), ending], "max_tokens": 1, "echo": true,
                      "add_generation_prompt": false, "continue_final_message": true});
    let (status, v) = post(&h, "/v1/chat/completions/batch", &body).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["message"]["content"], " bar");
    assert_eq!(v["choices"][1]["message"]["content"], "foo bar");
}

#[tokio::test]
async fn errors_name_their_field() {
    let h = Harness::start(vec![6], Duration::ZERO);
    let ok = user("hello");
    let long = json!([{"role": "user", "content": "hello ".repeat(5000)}]);
    let many: Vec<Value> = (0..257).map(|_| ok.clone()).collect();
    let cases = [
        (json!({"max_tokens": 1}), "messages", "required"),
        (json!({"messages": ok}), "messages[0]", "list of messages"),
        (
            json!({"messages": "hi"}),
            "messages",
            "list of conversations",
        ),
        (json!({"messages": []}), "messages", "must not be empty"),
        (
            json!({"messages": many}),
            "messages",
            "--max-batch-prompts 256",
        ),
        (
            json!({"messages": [ok, []]}),
            "messages[1]",
            "`messages[1]` must not be empty",
        ),
        (
            json!({"messages": [ok, [{"role": 5}]]}),
            "messages[1][0].role",
            "`messages[1][0].role`",
        ),
        (
            json!({"messages": [ok, [{"role": "user", "content": [{"type": "image_url"}]}]]}),
            "messages[1][0].content[0]",
            "image_url",
        ),
        (
            json!({"messages": [ok, long]}),
            "messages[1]",
            "maximum context length",
        ),
        (
            json!({"messages": [ok], "stream": true}),
            "stream",
            "not streamed",
        ),
        (json!({"messages": [ok], "n": 2}), "n", "`n` must be 1"),
        (
            json!({"messages": [ok], "tool_choice": "auto"}),
            "tool_choice",
            "\"none\"",
        ),
        (
            json!({"messages": [ok], "prompt_logprobs": 1}),
            "prompt_logprobs",
            "batch",
        ),
        (
            json!({"messages": [ok], "temperature": -1}),
            "temperature",
            "got -1",
        ),
        (
            json!({"messages": [ok], "colour": 1}),
            "colour",
            "unknown field",
        ),
    ];
    for (body, param, words) in cases {
        let (status, v) = post(&h, "/v1/chat/completions/batch", &body).await;
        assert_eq!(status, 400, "{body}: {v}");
        assert_eq!(v["error"]["param"], param, "{body}: {v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(words), "{body}: {message}");
    }
    let (status, v) = post(
        &h,
        "/v1/chat/completions/batch",
        &json!({"messages": [ok], "model": "gpt-9"}),
    )
    .await;
    assert_eq!((status, &v["error"]["param"]), (404, &json!("model")));
    // Tools still reach the template with the default `tool_choice` "none".
    let tools = json!([{"type": "function", "function": {"name": "f"}}]);
    let body = json!({"messages": [ok], "tools": tools, "max_tokens": 1});
    assert_eq!(post(&h, "/v1/chat/completions/batch", &body).await.0, 200);
}
