//! `/v1/chat/completions` end to end (router + real engine client over ZMQ + fake
//! engine): echo, `prompt_logprobs`, continuous usage, the sampling fields, and the
//! engine's queue / prefill times in `/metrics`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::testutil::{bad_request, call, events, json_of, Harness};

const PATH: &str = "/v1/chat/completions";

async fn post(h: &Harness, body: &Value) -> (u16, bytes::Bytes) {
    let (status, _, bytes) = call(h, "POST", PATH, &body.to_string()).await;
    (status.as_u16(), bytes)
}

#[tokio::test]
async fn echo_prepends_the_assistants_last_message() {
    let h = Harness::start(vec![6], Duration::ZERO);
    let messages = json!([{"role": "user", "content": "hello"},
                          {"role": "assistant", "content": [{"type": "text", "text": "foo"}]}]);
    let body = json!({"messages": messages, "echo": true, "max_tokens": 2, "n": 2,
                      "add_generation_prompt": false, "continue_final_message": true});
    let (status, bytes) = post(&h, &body).await;
    assert_eq!(status, 200);
    let v = json_of(&bytes);
    for choice in v["choices"].as_array().unwrap() {
        assert_eq!(choice["message"]["content"], "foo bar bar");
    }
    // Streamed: the role chunks, then each choice's echo, then the deltas.
    let mut body = body;
    body["stream"] = json!(true);
    let (status, bytes) = post(&h, &body).await;
    assert_eq!(status, 200);
    let evs = events(&bytes);
    let deltas: Vec<&Value> = evs.iter().map(|e| &e["choices"][0]["delta"]).collect();
    assert_eq!(deltas[0], &json!({"role": "assistant", "content": ""}));
    assert_eq!(deltas[1], &json!({"role": "assistant", "content": ""}));
    assert_eq!(deltas[2], &json!({"content": "foo"}));
    assert_eq!(deltas[3], &json!({"content": "foo"}));
    assert_eq!(evs[2]["choices"][0]["index"], 0);
    assert_eq!(evs[3]["choices"][0]["index"], 1);
    // A last message from the user: echo changes nothing.
    let body = json!({"messages": [{"role": "user", "content": "hello"}], "echo": true,
                      "max_tokens": 2});
    let v = json_of(&post(&h, &body).await.1);
    assert_eq!(v["choices"][0]["message"]["content"], " bar bar");
}

#[tokio::test]
async fn prompt_logprobs_top_level_and_on_the_first_chunk() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body = json!({"messages": messages, "max_tokens": 1, "prompt_logprobs": 0});
    let (status, bytes) = post(&h, &body).await;
    assert_eq!(status, 200);
    let v = json_of(&bytes);
    // "<s> user hello assistant" → [0, 9, 3, 10].
    let pl = v["prompt_logprobs"].as_array().unwrap();
    assert_eq!(pl.len(), 4);
    assert_eq!(pl[0], Value::Null);
    assert_eq!(
        pl[1],
        json!({"9": {"logprob": -1.0, "rank": 1, "decoded_token": "user"}})
    );
    assert!(v["choices"][0].get("prompt_logprobs").is_none());
    assert_eq!(h.engine.added()[0].sampling_params.prompt_logprobs, Some(0));
    // Not asked: absent.
    let body = json!({"messages": messages, "max_tokens": 1});
    assert!(json_of(&post(&h, &body).await.1)
        .get("prompt_logprobs")
        .is_none());
    // Streamed: the first chunk (the role) carries it, no other.
    let body = json!({"messages": messages, "max_tokens": 2, "prompt_logprobs": 1,
                      "stream": true});
    let (status, bytes) = post(&h, &body).await;
    assert_eq!(status, 200);
    let evs = events(&bytes);
    assert_eq!(evs[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(evs[0]["prompt_logprobs"].as_array().unwrap().len(), 4);
    assert!(evs[1..].iter().all(|e| e.get("prompt_logprobs").is_none()));
    let (status, _) = post(&h, &json!({"messages": messages, "prompt_logprobs": 21})).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn continuous_usage_on_every_chunk() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let body = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2,
                      "stream": true,
                      "stream_options": {"include_usage": true, "continuous_usage_stats": true}});
    let (status, bytes) = post(&h, &body).await;
    assert_eq!(status, 200);
    let evs = events(&bytes);
    let completions: Vec<u64> = evs
        .iter()
        .map(|e| {
            assert_eq!(e["usage"]["prompt_tokens"], 4, "{e}");
            e["usage"]["completion_tokens"].as_u64().unwrap()
        })
        .collect();
    // The role chunk (0), the tokens as they came (outputs may merge), the usage chunk.
    assert_eq!(completions[0], 0);
    assert!(
        completions.windows(2).all(|w| w[0] <= w[1]),
        "{completions:?}"
    );
    assert_eq!(completions[completions.len() - 2..], [2, 2]);
    assert_eq!(evs.last().unwrap()["choices"], json!([]));
}

#[tokio::test]
async fn sampling_fields_reach_the_engine_or_get_a_400() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let messages = json!([{"role": "user", "content": "hello"}]);
    let body = json!({"messages": messages, "max_tokens": 1, "logit_bias": {"5": 3, "3": -1},
                      "allowed_token_ids": [3, 5], "bad_words": ["foo bar"]});
    assert_eq!(post(&h, &body).await.0, 200);
    let sent = &h.engine.added()[0].sampling_params;
    assert_eq!(sent.logit_bias, vec![(3, -1.0), (5, 3.0)]);
    assert_eq!(sent.allowed_token_ids, Some(vec![3, 5]));
    assert_eq!(sent.bad_words_token_ids, vec![vec![5, 6]]);
    for (field, value) in [
        ("logit_bias", json!({"5": 200})),
        ("allowed_token_ids", json!([])),
        ("bad_words", json!([null])),
    ] {
        let mut body = json!({"messages": messages});
        body[field] = value;
        let (param, message) = bad_request(&h, PATH, &body.to_string()).await;
        assert_eq!(param, json!(field), "{message}");
    }
}

#[tokio::test]
async fn queue_and_prefill_times_reach_the_metrics() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let body = json!({"messages": [{"role": "user", "content": "hello"}], "max_tokens": 2});
    assert_eq!(post(&h, &body).await.0, 200);
    let (status, _, bytes) = call(&h, "GET", "/metrics", "").await;
    assert_eq!(status.as_u16(), 200);
    let text = String::from_utf8_lossy(&bytes);
    let l = "model_name=\"tiny\",engine=\"0\"";
    for line in [
        format!("vllm:request_queue_time_seconds_count{{{l}}} 1"),
        format!("vllm:request_queue_time_seconds_sum{{{l}}} 0.25"),
        format!("vllm:request_prefill_time_seconds_count{{{l}}} 1"),
        format!("vllm:request_prefill_time_seconds_sum{{{l}}} 0.125"),
        format!("vllm:request_inference_time_seconds_count{{{l}}} 1"),
        "# TYPE vllm:request_queue_time_seconds histogram".to_owned(),
    ] {
        assert!(text.lines().any(|t| t == line), "{line} not in\n{text}");
    }
}
