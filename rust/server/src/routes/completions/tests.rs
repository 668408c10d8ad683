//! `/v1/completions` end to end (router + real engine client over ZMQ + fake engine):
//! batched prompts, echo with logprobs, `prompt_logprobs`, continuous usage, and the
//! sampling fields reaching the engine. (The queue / prefill metrics: the chat tests.)

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};

use crate::testutil::{bad_request, call, events, json_of, Harness};

const PATH: &str = "/v1/completions";

async fn complete(h: &Harness, body: Value) -> Value {
    let (status, _, bytes) = call(h, "POST", PATH, &body.to_string()).await;
    let v = json_of(&bytes);
    assert_eq!(status.as_u16(), 200, "{body}: {v}");
    v
}

async fn stream(h: &Harness, body: Value) -> Vec<Value> {
    let (status, ct, bytes) = call(h, "POST", PATH, &body.to_string()).await;
    assert_eq!(
        (status.as_u16(), ct.as_str()),
        (200, "text/event-stream"),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    events(&bytes)
}

#[tokio::test]
async fn each_field_names_itself_in_its_400() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let many: Vec<&str> = vec!["hello"; 257];
    let cases = [
        (json!({"prompt": []}), "prompt", "empty list"),
        (json!({"prompt": ["hello", ""]}), "prompt", "empty string"),
        (
            json!({"prompt": [[3], [99]]}),
            "prompt",
            "out of the vocabulary",
        ),
        (json!({"prompt": many}), "prompt", "--max-batch-prompts 256"),
        (
            json!({"prompt": "x", "max_tokens": 0}),
            "max_tokens",
            "at least 1",
        ),
        (
            json!({"prompt": "x", "prompt_logprobs": 21}),
            "prompt_logprobs",
            "[0, 20]",
        ),
        (
            json!({"prompt": "x", "logprobs": 21}),
            "logprobs",
            "[0, 20]",
        ),
        (
            json!({"prompt": "x", "logit_bias": {"abc": 1}}),
            "logit_bias",
            "\"abc\"",
        ),
        (
            json!({"prompt": "x", "logit_bias": {"3": -101}}),
            "logit_bias",
            "-101",
        ),
        (
            json!({"prompt": "x", "logit_bias": {"11": 1}}),
            "logit_bias",
            "[0, 11)",
        ),
        (
            json!({"prompt": "x", "allowed_token_ids": []}),
            "allowed_token_ids",
            "empty",
        ),
        (
            json!({"prompt": "x", "allowed_token_ids": [12]}),
            "allowed_token_ids",
            "12",
        ),
        (
            json!({"prompt": "x", "bad_words": [1]}),
            "bad_words",
            "list of strings",
        ),
        (
            json!({"prompt": "x", "bad_words": "foo"}),
            "bad_words",
            "list of strings",
        ),
    ];
    for (body, param, words) in cases {
        let (got, message) = bad_request(&h, PATH, &body.to_string()).await;
        assert_eq!(got, json!(param), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
    // Nothing reached the engine: a bad prompt fails the whole batch first.
    assert!(h.engine.added().is_empty());
}

#[tokio::test]
async fn batched_prompts_with_n_whole() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let v = complete(
        &h,
        json!({"prompt": ["hello", "hello world"], "n": 2, "max_tokens": 2, "seed": 4,
               "echo": true}),
    )
    .await;
    assert!(v["id"].as_str().unwrap().starts_with("cmpl-"));
    let choices = v["choices"].as_array().unwrap();
    let indices: Vec<_> = choices
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(indices, [0, 1, 2, 3]);
    let texts: Vec<_> = choices
        .iter()
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "hello foo bar",
            "hello foo bar",
            "hello world foo bar",
            "hello world foo bar"
        ]
    );
    // Each prompt once (1 + 2), every choice's tokens (4 × 2).
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 8, "total_tokens": 11,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
    let added = h.engine.added();
    let id = v["id"].as_str().unwrap();
    let ids: Vec<_> = added.iter().map(|r| r.request_id.clone()).collect();
    assert_eq!(ids, (0..4).map(|i| format!("{id}-{i}")).collect::<Vec<_>>());
    let prompts: Vec<_> = added.iter().map(|r| r.prompt_token_ids.clone()).collect();
    assert_eq!(prompts, [vec![3], vec![3], vec![3, 4], vec![3, 4]]);
    let seeds: Vec<_> = added.iter().map(|r| r.sampling_params.seed).collect();
    assert_eq!(seeds, [Some(4), Some(5), Some(4), Some(5)]);
}

#[tokio::test]
async fn batched_token_prompts_streamed_interleave_by_index() {
    let h = Harness::start(vec![5, 6, 8], Duration::from_millis(2));
    let evs = stream(
        &h,
        json!({"prompt": [[3], [4, 5, 6]], "n": 2, "max_tokens": 3, "stream": true,
               "echo": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    let mut texts: BTreeMap<u64, String> = BTreeMap::new();
    let mut finishes: BTreeMap<u64, Value> = BTreeMap::new();
    let (usage, chunks) = evs.split_last().unwrap();
    for e in chunks {
        assert_eq!(e["id"], evs[0]["id"]);
        let choices = e["choices"].as_array().unwrap();
        assert_eq!(choices.len(), 1, "{e}");
        let index = choices[0]["index"].as_u64().unwrap();
        texts
            .entry(index)
            .or_default()
            .push_str(choices[0]["text"].as_str().unwrap());
        if !choices[0]["finish_reason"].is_null() {
            finishes.insert(index, choices[0]["finish_reason"].clone());
        }
        assert!(e.get("usage").is_none(), "{e}");
    }
    assert_eq!(texts.len(), 4);
    for (i, text) in &texts {
        let want = if *i < 2 {
            "hello foo bar baz"
        } else {
            "world foo bar foo bar baz"
        };
        assert_eq!(text, want, "{i}");
    }
    assert!(finishes.values().all(|f| f == "length") && finishes.len() == 4);
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 4, "completion_tokens": 12, "total_tokens": 16,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
}

#[tokio::test]
async fn echo_with_logprobs_covers_prompt_and_completion() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let v = complete(
        &h,
        json!({"prompt": "hello world", "max_tokens": 2, "echo": true, "logprobs": 1}),
    )
    .await;
    let choice = &v["choices"][0];
    assert_eq!(choice["text"], "hello world foo bar");
    assert_eq!(
        choice["logprobs"],
        json!({
            "tokens": ["hello", "world", "foo", "bar"],
            "token_logprobs": [null, -1.0, -0.5, -0.5],
            "top_logprobs": [null, {"world": -1.0, "foo": -0.1}, {"foo": -0.5}, {"bar": -0.5}],
            "text_offset": [0, 5, 10, 13],
        })
    );
    assert!(choice.get("prompt_logprobs").is_none());
    // The engine was asked for the prompt's logprobs (top 1).
    assert_eq!(h.engine.added()[0].sampling_params.prompt_logprobs, Some(1));

    // Streamed: the first chunk carries the prompt's text and logprobs.
    let evs = stream(
        &h,
        json!({"prompt": "hello world", "max_tokens": 2, "echo": true, "logprobs": 1,
               "stream": true}),
    )
    .await;
    let first = &evs[0]["choices"][0];
    assert!(first["text"].as_str().unwrap().starts_with("hello world"));
    assert_eq!(first["logprobs"]["token_logprobs"][0], Value::Null);
    assert_eq!(first["logprobs"]["tokens"][0], "hello");
    assert_eq!(first["logprobs"]["tokens"][1], "world");
    let offsets: Vec<Value> = evs
        .iter()
        .filter_map(|e| {
            e["choices"][0]["logprobs"]["text_offset"]
                .as_array()
                .cloned()
        })
        .flatten()
        .collect();
    assert_eq!(offsets, [json!(0), json!(5), json!(10), json!(13)]);
}

#[tokio::test]
async fn max_tokens_zero_with_echo_is_the_prompt_only() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let v = complete(
        &h,
        json!({"prompt": "hello world", "max_tokens": 0, "echo": true, "logprobs": 0}),
    )
    .await;
    let choice = &v["choices"][0];
    assert_eq!(choice["text"], "hello world");
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(
        choice["logprobs"],
        json!({"tokens": ["hello", "world"], "token_logprobs": [null, -1.0],
               "top_logprobs": [null, {"world": -1.0}], "text_offset": [0, 5]})
    );
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 2, "completion_tokens": 0, "total_tokens": 2,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
    let sent = &h.engine.added()[0].sampling_params;
    assert_eq!((sent.max_tokens, sent.prompt_logprobs), (1, Some(0)));
    // Streamed (the EOS token, too, is dropped and the finish is `length`).
    let h = Harness::start(vec![1], Duration::ZERO);
    let evs = stream(
        &h,
        json!({"prompt": [3, 4], "max_tokens": 0, "echo": true, "stream": true,
               "stream_options": {"include_usage": true}}),
    )
    .await;
    let text: String = evs
        .iter()
        .filter_map(|e| e["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "hello world");
    assert_eq!(evs[evs.len() - 2]["choices"][0]["finish_reason"], "length");
    assert_eq!(evs.last().unwrap()["usage"]["completion_tokens"], 0);
}

#[tokio::test]
async fn prompt_logprobs_are_vllms_list() {
    let h = Harness::start(vec![5], Duration::ZERO);
    let body = json!({"prompt": "hello world foo", "max_tokens": 1, "prompt_logprobs": 2});
    let (status, _, bytes) = call(&h, "POST", PATH, &body.to_string()).await;
    assert_eq!(status.as_u16(), 200);
    let v = json_of(&bytes);
    let entry = |id: u32, logprob: f64, rank: u32, text: &str| {
        (
            id.to_string(),
            json!({"logprob": logprob, "rank": rank, "decoded_token": text}),
        )
    };
    let position = |entries: Vec<(String, Value)>| Value::Object(entries.into_iter().collect());
    assert_eq!(
        v["choices"][0]["prompt_logprobs"],
        json!([
            null,
            position(vec![
                entry(4, -1.0, 3, "world"),
                entry(5, -0.1, 1, "foo"),
                entry(6, -0.2, 2, "bar")
            ]),
            position(vec![
                entry(5, -2.0, 3, "foo"),
                entry(6, -0.1, 1, "bar"),
                entry(7, -0.2, 2, "STOP")
            ]),
        ])
    );
    // The actual token comes first in each position's object.
    let raw = String::from_utf8_lossy(&bytes);
    let at = |needle: &str| raw.find(needle).unwrap();
    assert!(at("\"4\":{") < at("\"5\":{"), "{raw}");
    assert_eq!(h.engine.added()[0].sampling_params.prompt_logprobs, Some(2));

    // Streamed: on the first chunk of each choice only.
    let evs = stream(
        &h,
        json!({"prompt": ["hello world", "foo"], "max_tokens": 2, "prompt_logprobs": 0,
               "stream": true}),
    )
    .await;
    for index in [0, 1] {
        let mine: Vec<&Value> = evs
            .iter()
            .map(|e| &e["choices"][0])
            .filter(|c| c["index"] == index)
            .collect();
        let want = if index == 0 {
            json!([null, {"4": {"logprob": -1.0, "rank": 1, "decoded_token": "world"}}])
        } else {
            json!([null])
        };
        assert_eq!(mine[0]["prompt_logprobs"], want);
        assert!(mine[1..].iter().all(|c| c.get("prompt_logprobs").is_none()));
    }
}

#[tokio::test]
async fn continuous_usage_on_every_chunk() {
    let h = Harness::start(vec![5, 6, 8], Duration::ZERO);
    let evs = stream(
        &h,
        json!({"prompt": ["hello world", "foo"], "max_tokens": 3, "stream": true,
               "stream_options": {"include_usage": true, "continuous_usage_stats": true}}),
    )
    .await;
    let (last, chunks) = evs.split_last().unwrap();
    let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
    for e in chunks {
        let index = e["choices"][0]["index"].as_u64().unwrap();
        let usage = &e["usage"];
        let prompt = if index == 0 { 2 } else { 1 };
        let done = usage["completion_tokens"].as_u64().unwrap();
        assert_eq!(usage["prompt_tokens"], prompt, "{e}");
        assert_eq!(usage["total_tokens"].as_u64(), Some(prompt + done), "{e}");
        assert!(done > seen.get(&index).copied().unwrap_or(0), "{e}");
        seen.insert(index, done);
    }
    assert_eq!(seen, BTreeMap::from([(0, 3), (1, 3)]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
    // Without include_usage it does nothing.
    let evs = stream(
        &h,
        json!({"prompt": "hello", "max_tokens": 2, "stream": true,
               "stream_options": {"continuous_usage_stats": true}}),
    )
    .await;
    assert!(evs.iter().all(|e| e.get("usage").is_none()));
}

#[tokio::test]
async fn sampling_fields_reach_the_engine() {
    let h = Harness::start(vec![5], Duration::ZERO);
    complete(
        &h,
        json!({"prompt": "hello", "max_tokens": 1, "logit_bias": {"8": 5.5, "3": -100},
               "allowed_token_ids": [3, 5, 8], "bad_words": ["foo bar", " baz"]}),
    )
    .await;
    let sent = &h.engine.added()[0].sampling_params;
    assert_eq!(sent.logit_bias, vec![(3, -100.0), (8, 5.5)]);
    assert_eq!(sent.allowed_token_ids, Some(vec![3, 5, 8]));
    assert_eq!(sent.bad_words_token_ids, vec![vec![5, 6], vec![8]]);
    assert_eq!(sent.prompt_logprobs, None);
}
