//! vLLM's request extensions through the serving router and the fake engine: token ids
//! where vLLM puts them (whole and streamed, chat and completions), token ids as the
//! logprobs' names, truncation as the engine receives it, and the `guided_*` fields'
//! constraint. The same behaviour as tests/server/test_extras_http.py.

use super::*;
use crate::testutil::bad_request;

/// The tiny template's prompt of one user message "hello": `<s> user hello assistant`.
const PROMPT: [u32; 4] = [0, 9, 3, 10];
const HELLO: &str = r#"[{"role": "user", "content": "hello"}]"#;

fn body(json: Value) -> String {
    json.to_string()
}

#[tokio::test]
async fn chat_token_ids_whole_and_streamed() {
    // "foo bar" then EOS: three tokens, the EOS among them (as vLLM's output ids).
    let h = Harness::start(vec![5, 6, 1], Duration::ZERO);
    let messages: Value = serde_json::from_str(HELLO).unwrap();
    let request = json!({"messages": messages, "return_token_ids": true});
    let (status, _, bytes) = call(&h, "POST", "/v1/chat/completions", &body(request.clone())).await;
    let v = json_of(&bytes);
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["prompt_token_ids"], json!(PROMPT));
    let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    assert_eq!(keys.last().unwrap().as_str(), "prompt_token_ids");
    let choice = &v["choices"][0];
    assert_eq!(choice["token_ids"], json!([5, 6, 1]));
    assert_eq!(choice["message"]["content"], " foo bar");
    let keys: Vec<&String> = choice.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["index", "message", "logprobs", "finish_reason", "token_ids"]
    );
    let mut streamed = request;
    streamed["stream"] = json!(true);
    let (_, _, bytes) = call(&h, "POST", "/v1/chat/completions", &body(streamed)).await;
    let evs = events(&bytes);
    assert_eq!(evs[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(evs[0]["prompt_token_ids"], json!(PROMPT));
    assert!(evs[0]["choices"][0].get("token_ids").is_none());
    assert!(evs[1..].iter().all(|e| e.get("prompt_token_ids").is_none()));
    let ids: Vec<Value> = evs[1..]
        .iter()
        .flat_map(|e| e["choices"][0]["token_ids"].as_array().unwrap().clone())
        .collect();
    assert_eq!(Value::Array(ids), json!([5, 6, 1]));
    // Not asked for: not there.
    let plain = json!({"messages": messages});
    let (_, _, bytes) = call(&h, "POST", "/v1/chat/completions", &body(plain)).await;
    let v = json_of(&bytes);
    assert!(v.get("prompt_token_ids").is_none() && v["choices"][0].get("token_ids").is_none());
}

#[tokio::test]
async fn completion_token_ids_per_prompt_and_echo() {
    let h = Harness::start(vec![5, 6, 1], Duration::ZERO);
    let request = json!({"prompt": ["hello world", "world"], "return_token_ids": true,
                         "echo": true});
    let (status, _, bytes) = call(&h, "POST", "/v1/completions", &body(request)).await;
    let v = json_of(&bytes);
    assert_eq!(status, StatusCode::OK, "{v}");
    for (index, (ids, text)) in [(json!([3, 4]), "hello world"), (json!([4]), "world")]
        .into_iter()
        .enumerate()
    {
        let choice = &v["choices"][index];
        assert_eq!(choice["prompt_token_ids"], ids);
        assert_eq!(choice["token_ids"], json!([5, 6, 1]));
        assert_eq!(
            choice["text"],
            format!("{text} foo bar"),
            "echo keeps the prompt"
        );
        let keys: Vec<&String> = choice.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "index",
                "text",
                "logprobs",
                "finish_reason",
                "token_ids",
                "prompt_token_ids"
            ]
        );
    }
    let request = json!({"prompt": "hello world", "return_token_ids": true, "stream": true});
    let (_, _, bytes) = call(&h, "POST", "/v1/completions", &body(request)).await;
    let evs = events(&bytes);
    assert_eq!(evs[0]["choices"][0]["prompt_token_ids"], json!([3, 4]));
    assert!(evs[1..]
        .iter()
        .all(|e| e["choices"][0].get("prompt_token_ids").is_none()));
    let ids: Vec<Value> = evs
        .iter()
        .flat_map(|e| e["choices"][0]["token_ids"].as_array().unwrap().clone())
        .collect();
    assert_eq!(Value::Array(ids), json!([5, 6, 1]));
    // max_tokens 0 with echo: the prompt alone, no generated token shown.
    let request = json!({"prompt": "hello", "return_token_ids": true, "echo": true,
                         "max_tokens": 0});
    let (_, _, bytes) = call(&h, "POST", "/v1/completions", &body(request)).await;
    assert_eq!(json_of(&bytes)["choices"][0]["token_ids"], json!([]));
}

#[tokio::test]
async fn token_ids_name_the_logprobs_tokens() {
    let h = Harness::start(vec![5, 6, 1], Duration::ZERO);
    let messages: Value = serde_json::from_str(HELLO).unwrap();
    let request = json!({"messages": messages, "logprobs": true, "top_logprobs": 2,
                         "return_tokens_as_token_ids": true});
    let (_, _, bytes) = call(&h, "POST", "/v1/chat/completions", &body(request)).await;
    let v = json_of(&bytes);
    let first = &v["choices"][0]["logprobs"]["content"][0];
    assert_eq!(first["token"], "token_id:5");
    assert_eq!(
        first["bytes"],
        json!(b"foo".to_vec()),
        "the token's own text"
    );
    assert_eq!(first["top_logprobs"][1]["token"], "token_id:6");
    assert_eq!(
        first["top_logprobs"][1]["bytes"],
        json!(b"token_id:6".to_vec())
    );
    let request = json!({"prompt": "hello", "logprobs": 1, "max_tokens": 2,
                         "return_tokens_as_token_ids": true});
    let (_, _, bytes) = call(&h, "POST", "/v1/completions", &body(request)).await;
    let logprobs = &json_of(&bytes)["choices"][0]["logprobs"];
    assert_eq!(logprobs["tokens"], json!(["token_id:5", "token_id:6"]));
    assert_eq!(logprobs["top_logprobs"][0], json!({"token_id:5": -0.5}));
    assert_eq!(
        logprobs["text_offset"],
        json!([0, 10]),
        "offsets count the names"
    );
}

#[tokio::test]
async fn the_engine_gets_the_truncated_prompt() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let cases = [
        (
            json!({"truncate_prompt_tokens": 2, "truncation_side": "left"}),
            vec![6, 8],
        ),
        (json!({"truncate_prompt_tokens": 2}), vec![3, 4]),
        (json!({"truncate_prompt_tokens": -1}), vec![3, 4, 5, 6, 8]),
    ];
    for (fields, want) in cases {
        let mut request = json!({"prompt": "hello world foo bar baz", "max_tokens": 1});
        request
            .as_object_mut()
            .unwrap()
            .extend(fields.as_object().unwrap().clone());
        let (status, _, bytes) = call(&h, "POST", "/v1/completions", &body(request)).await;
        let v = json_of(&bytes);
        assert_eq!(status, StatusCode::OK, "{v}");
        assert_eq!(v["usage"]["prompt_tokens"], want.len());
        let sent = h.engine.added().pop().unwrap();
        assert_eq!(sent.prompt_token_ids, want, "{fields}");
    }
    let messages: Value = serde_json::from_str(HELLO).unwrap();
    let request = json!({"messages": messages, "max_tokens": 1, "truncate_prompt_tokens": 3,
                         "truncation_side": "left"});
    call(&h, "POST", "/v1/chat/completions", &body(request)).await;
    assert_eq!(
        h.engine.added().pop().unwrap().prompt_token_ids,
        PROMPT[1..]
    );
    let request = json!({"prompt": "hello", "truncate_prompt_tokens": 0});
    let (param, message) = bad_request(&h, "/v1/completions", &body(request)).await;
    assert_eq!(param, "prompt", "{message}");
}

#[tokio::test]
async fn guided_fields_reach_the_engine_as_their_constraint() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let request = json!({"prompt": "hello", "max_tokens": 1, "guided_choice": ["foo", "bar"],
                         "guided_decoding_backend": "xgrammar"});
    let (status, _, bytes) = call(&h, "POST", "/v1/completions", &body(request)).await;
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));
    let sent = h.engine.added().pop().unwrap().sampling_params;
    assert_eq!(
        sent.structured_outputs.and_then(|s| s.choice),
        Some(vec!["foo".to_owned(), "bar".to_owned()])
    );
}
