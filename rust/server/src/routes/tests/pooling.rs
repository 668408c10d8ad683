//! The pooling routes through the serving router, the real engine client and the fake
//! engine as a pooling model (its answers: `vrs_engine_client::fake::pooling`): each
//! route's shape, every input form, base64, the errors, runner mismatches both ways,
//! classify, score and rerank: [`scores`]; concurrency, aborts, real HTTP, request ids,
//! the queue and `/metrics`: [`edge`].

use std::time::Duration;

use serde_json::{json, Value};
use vrs_engine_client::fake::pooling::{embedding, normalized, Pooling};
use vrs_wire::PoolingTask::Embed;

use crate::state::HttpOptions;
use crate::testutil::{bad_request, call, json_of, Harness};

mod edge;
mod scores;

fn embedder() -> Harness {
    Harness::pooling(
        Pooling::new(&[Embed], &[]),
        Duration::ZERO,
        HttpOptions::default(),
    )
}

/// Float32 rounding, as the engine answers.
fn f32s(v: Vec<f64>) -> Vec<f64> {
    v.into_iter().map(|x| f64::from(x as f32)).collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

async fn ok(h: &Harness, path: &str, body: Value) -> Value {
    let (status, ct, bytes) = call(h, "POST", path, &body.to_string()).await;
    let v = json_of(&bytes);
    assert_eq!(status, 200, "{body}: {v}");
    assert_eq!(ct, "application/json");
    v
}

fn keys(v: &Value) -> Vec<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn usage(n: usize) -> Value {
    json!({"prompt_tokens": n, "total_tokens": n, "completion_tokens": 0,
           "prompt_tokens_details": null, "completion_tokens_details": null})
}

#[tokio::test]
async fn embeddings_take_every_input_form() {
    let h = embedder();
    let v = ok(
        &h,
        "/v1/embeddings",
        json!({"model": "tiny", "input": "hello world"}),
    )
    .await;
    assert_eq!(
        keys(&v),
        ["id", "object", "created", "model", "data", "usage"]
    );
    assert!(v["id"].as_str().unwrap().starts_with("embd-"), "{v}");
    assert_eq!(
        (v["object"].clone(), v["model"].clone()),
        (json!("list"), json!("tiny"))
    );
    assert_eq!(keys(&v["data"][0]), ["index", "object", "embedding"]);
    assert_eq!(v["data"][0]["object"], "embedding");
    let want = f32s(normalized(&embedding(&[3, 4])));
    assert_eq!(floats(&v["data"][0]["embedding"]), want);
    assert_eq!(v["usage"], usage(2));
    let sent = h.engine.added();
    let params = sent[0].pooling_params.as_ref().unwrap();
    assert_eq!((params.task.as_str(), params.normalize), ("embed", None));
    assert_eq!(
        sent[0].request_id,
        v["id"].as_str().unwrap(),
        "one prompt: the id"
    );

    let forms = [
        (json!(["hello world", "foo"]), vec![vec![3, 4], vec![5]]),
        (json!([3, 4]), vec![vec![3, 4]]),
        (json!([[3, 4], [5, 6, 8]]), vec![vec![3, 4], vec![5, 6, 8]]),
    ];
    for (input, ids) in forms {
        let v = ok(&h, "/v1/embeddings", json!({"input": input})).await;
        let data = v["data"].as_array().unwrap();
        assert_eq!(data.len(), ids.len(), "{input}");
        for (i, (item, ids)) in data.iter().zip(&ids).enumerate() {
            assert_eq!(item["index"], i);
            assert_eq!(
                floats(&item["embedding"]),
                f32s(normalized(&embedding(ids)))
            );
        }
        assert_eq!(v["usage"], usage(ids.iter().map(Vec::len).sum()));
    }
}

#[tokio::test]
async fn embeddings_of_a_conversation_render_the_chat_template() {
    let h = embedder();
    let messages = json!([{"role": "user", "content": "hello"}]);
    // "<s> user hello " (no generation prompt by default): ids 0 9 3.
    let v = ok(&h, "/v1/embeddings", json!({"messages": messages})).await;
    assert_eq!(
        floats(&v["data"][0]["embedding"]),
        f32s(normalized(&embedding(&[0, 9, 3])))
    );
    // A chat-style `input` is the same conversation.
    let same = ok(&h, "/v1/embeddings", json!({"input": messages})).await;
    assert_eq!(same["data"], v["data"]);
    let body = json!({"messages": messages, "add_generation_prompt": true});
    ok(&h, "/v1/embeddings", body).await;
    let ids: Vec<Vec<u32>> = h
        .engine
        .added()
        .into_iter()
        .map(|r| r.prompt_token_ids)
        .collect();
    assert_eq!(ids, [vec![0, 9, 3], vec![0, 9, 3], vec![0, 9, 3, 10]]);
    // A list of conversations, in `messages` or `input`: one embedding each.
    let batch =
        json!([[{"role": "user", "content": "hello"}], [{"role": "user", "content": "foo"}]]);
    for field in ["messages", "input"] {
        let v = ok(&h, "/v1/embeddings", json!({field: batch})).await;
        assert_eq!(v["data"].as_array().unwrap().len(), 2, "{field}");
        assert_eq!(v["data"][0], same["data"][0]);
        assert_eq!(v["usage"]["prompt_tokens"], 6);
    }
}

/// Standard base64 decoded (the test's own decoder).
fn unbase64(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let sextets: Vec<u32> = s
        .bytes()
        .filter(|&b| b != b'=')
        .map(|b| ALPHABET.iter().position(|&a| a == b).unwrap() as u32)
        .collect();
    let mut out = Vec::new();
    for chunk in sextets.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0, |n, (i, s)| n | s << (18 - 6 * i));
        out.extend(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

#[tokio::test]
async fn base64_embeddings_are_the_float32_bytes() {
    let h = embedder();
    let floats_v = ok(&h, "/v1/embeddings", json!({"input": ["hello", "foo bar"]})).await;
    let body = json!({"input": ["hello", "foo bar"], "encoding_format": "base64"});
    let b64 = ok(&h, "/v1/embeddings", body).await;
    for (f, b) in floats_v["data"]
        .as_array()
        .unwrap()
        .iter()
        .zip(b64["data"].as_array().unwrap())
    {
        let bytes = unbase64(b["embedding"].as_str().unwrap());
        let decoded: Vec<f64> = bytes
            .chunks(4)
            .map(|c| f64::from(f32::from_le_bytes(c.try_into().unwrap())))
            .collect();
        assert_eq!(decoded, floats(&f["embedding"]));
    }
    let v = ok(
        &h,
        "/pooling",
        json!({"input": "hello", "encoding_format": "base64"}),
    )
    .await;
    assert!(v["data"][0]["data"].is_string(), "{v}");
}

#[tokio::test]
async fn dimensions_and_normalize_reach_the_engine() {
    let h = embedder();
    let v = ok(&h, "/v1/embeddings", json!({"input": [3], "dimensions": 4})).await;
    let mut raw = embedding(&[3]);
    raw.truncate(4);
    assert_eq!(floats(&v["data"][0]["embedding"]), f32s(normalized(&raw)));
    let v = ok(
        &h,
        "/v1/embeddings",
        json!({"input": [3], "use_activation": false}),
    )
    .await;
    assert_eq!(floats(&v["data"][0]["embedding"]), f32s(embedding(&[3])));
    // The engine refuses what the model cannot do: a 400 with its message.
    let (param, message) =
        bad_request(&h, "/v1/embeddings", r#"{"input": [3], "dimensions": 9}"#).await;
    assert_eq!(
        (param, message.contains("out of range")),
        (Value::Null, true),
        "{message}"
    );
}

#[tokio::test]
async fn bad_requests_are_400s_naming_the_field() {
    let h = embedder();
    let long: Vec<u32> = vec![3; 65];
    let cases = [
        (json!({"input": []}), "input", "must not be empty"),
        (
            json!({"input": ""}),
            "input",
            "must not contain an empty prompt (prompt 0 is empty)",
        ),
        (json!({"input": [[3], []]}), "input", "(prompt 1 is empty)"),
        (
            json!({"input": "x", "normalize": false}),
            "normalize",
            "use `use_activation` instead",
        ),
        (
            json!({"input": "x", "messages": [{"role": "user", "content": "a"}]}),
            "messages",
            "not both",
        ),
        (
            json!({"input": "x", "truncate_prompt_tokens": -2}),
            "truncate_prompt_tokens",
            "-1 (the context length) or at least 0",
        ),
        (
            json!({"input": "x", "truncation_side": "middle"}),
            "truncation_side",
            "`left` or `right`, got `middle`",
        ),
        (
            json!({"input": "x", "embed_dtype": "int8"}),
            "embed_dtype",
            "float32, float16",
        ),
        (json!({}), "input", "`input` is required"),
        (
            json!({"input": [3, "x"]}),
            "input",
            "`input` must be a string, a list of strings",
        ),
        (json!({"input": [99]}), "input", "out of the vocabulary"),
        (
            json!({"input": long}),
            "input",
            "maximum context length is 64 tokens. However, prompt 0 of `input` has 65 tokens",
        ),
        (
            json!({"input": "x", "truncate_prompt_tokens": 65}),
            "truncate_prompt_tokens",
            "max_model_len = 64",
        ),
        (
            json!({"input": "x", "encoding_format": "bytes"}),
            "encoding_format",
            "`float` or `base64`, got `bytes`",
        ),
        (
            json!({"input": "x", "dimensions": 0}),
            "dimensions",
            "must be at least 1, got 0",
        ),
        (
            json!({"input": "x", "bogus": 1}),
            "bogus",
            "unknown field `bogus`",
        ),
        (
            json!({"input": "x", "priority": 3}),
            "priority",
            "Priority scheduling is not enabled",
        ),
    ];
    for (body, param, words) in cases {
        let (p, message) = bad_request(&h, "/v1/embeddings", &body.to_string()).await;
        assert_eq!(p, json!(param), "{body}: {message}");
        assert!(message.contains(words), "{body}: {message}");
    }
    // Truncated under the limit, the same prompt passes (its last tokens: the tiny
    // tokenizer's side is the default, right, so its first).
    let mut ids = vec![5u32];
    ids.extend(vec![3; 64]);
    let body = json!({"input": ids, "truncate_prompt_tokens": 10});
    let v = ok(&h, "/v1/embeddings", body).await;
    assert_eq!(v["usage"]["prompt_tokens"], 10);
    assert_eq!(h.engine.added().last().unwrap().prompt_token_ids[0], 5);
    let (status, _, _) = call(
        &h,
        "POST",
        "/v1/embeddings",
        r#"{"model": "x", "input": "a"}"#,
    )
    .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn runner_mismatches_are_400s_both_ways() {
    let generator = Harness::start(vec![5], Duration::ZERO);
    for path in [
        "/v1/embeddings",
        "/pooling",
        "/classify",
        "/score",
        "/v1/rerank",
    ] {
        let (param, message) = bad_request(&generator, path, r#"{"input": "hello"}"#).await;
        assert_eq!(param, Value::Null);
        assert!(
            message.contains("this model generates text: it does not serve pooling requests"),
            "{path}: {message}"
        );
    }
    let pooler = embedder();
    let generation = [
        (
            "/v1/completions",
            json!({"prompt": "hello", "max_tokens": 1}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "hi"}]}),
        ),
        (
            "/v1/chat/completions/batch",
            json!({"messages": [[{"role": "user", "content": "hi"}]]}),
        ),
        ("/v1/responses", json!({"input": "hi"})),
        (
            "/v1/messages",
            json!({"model": "tiny", "max_tokens": 1, "messages": [{"role": "user", "content": "hi"}]}),
        ),
    ];
    for (path, body) in generation {
        let (status, _, bytes) = call(&pooler, "POST", path, &body.to_string()).await;
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(status, 400, "{path}: {text}");
        let words = "this model serves pooling requests: embed (use /pooling, /rerank, /score, \
                     /v1/embeddings); it does not generate text";
        assert!(text.contains(words), "{path}: {text}");
    }
    assert!(pooler.engine.added().is_empty());
    // A pooling route whose task the model does not serve.
    let (_, message) = bad_request(&pooler, "/classify", r#"{"input": "hello"}"#).await;
    assert!(
        message.contains("does not serve the `classify` task (it serves: embed)"),
        "{message}"
    );
    let body = r#"{"input": "a", "task": "score"}"#;
    let (param, message) = bad_request(&pooler, "/pooling", body).await;
    assert_eq!(param, json!("task"));
    assert!(message.contains("`score` task"), "{message}");
}
