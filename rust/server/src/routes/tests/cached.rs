//! The prompt's cached tokens in every usage, from the engine's `num_cached_tokens`: the
//! fake engine reports the whole 16-token blocks a prompt shares with one it saw before
//! (never its last token), so a prompt of 20 tokens sent a second time has 16 cached.

use super::*;
use vrs_engine_client::fake::BLOCK_SIZE;

/// A prompt of 20 word ids starting with `first` (a fresh prompt for each `first`).
fn ids(first: u32) -> Vec<u32> {
    std::iter::once(first)
        .chain((0..19).map(|i| 3 + i % 8))
        .collect()
}

/// 20 words of chat content: "<s> user" + 20 words + "assistant" = 23 prompt tokens.
fn content() -> String {
    ["hello", "world", "foo", "bar"].repeat(5).join(" ")
}

fn details(v: &Value) -> &Value {
    &v["usage"]["prompt_tokens_details"]
}

#[tokio::test]
async fn completions_report_each_prompts_cached_tokens() {
    assert_eq!(BLOCK_SIZE, 16, "the counts below assume 16-token blocks");
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let body = json!({"prompt": ids(3), "max_tokens": 2}).to_string();
    let (_, _, first) = call(&h, "POST", "/v1/completions", &body).await;
    assert_eq!(details(&json_of(&first)), &json!({"cached_tokens": 0}));
    let (_, _, again) = call(&h, "POST", "/v1/completions", &body).await;
    assert_eq!(
        json_of(&again)["usage"],
        json!({"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22,
               "prompt_tokens_details": {"cached_tokens": 16}})
    );

    // Two prompts × n=2, the first seen before: each prompt counted once, as its first
    // choice found it (prompt 4's second choice hits the blocks of its first).
    let batch = json!({"prompt": [ids(3), ids(4)], "n": 2, "max_tokens": 2, "stream": true,
                       "stream_options": {"include_usage": true,
                                          "continuous_usage_stats": true}});
    let (_, _, bytes) = call(&h, "POST", "/v1/completions", &batch.to_string()).await;
    let evs = events(&bytes);
    let last = evs.last().unwrap();
    assert_eq!(last["choices"], json!([]));
    assert_eq!(
        last["usage"],
        json!({"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48,
               "prompt_tokens_details": {"cached_tokens": 16}})
    );
    // Each choice's chunks carry its own count.
    for (index, cached) in [(0, 16), (1, 16), (2, 0), (3, 16)] {
        let chunks: Vec<&Value> = evs
            .iter()
            .filter(|e| e["choices"][0]["index"] == index)
            .collect();
        assert!(!chunks.is_empty());
        for chunk in chunks {
            assert_eq!(details(chunk)["cached_tokens"], cached, "{chunk}");
        }
    }
    let mut whole = batch;
    whole["stream"] = json!(false);
    whole.as_object_mut().unwrap().remove("stream_options");
    let (_, _, bytes) = call(&h, "POST", "/v1/completions", &whole.to_string()).await;
    assert_eq!(details(&json_of(&bytes)), &json!({"cached_tokens": 32}));
}

#[tokio::test]
async fn chat_responses_and_messages_report_the_cached_prefix() {
    let h = Harness::start(vec![5, 6], Duration::ZERO);
    let messages = json!([{"role": "user", "content": content()}]);
    let chat = json!({"messages": messages, "max_tokens": 2, "n": 2}).to_string();
    let (_, _, fresh) = call(&h, "POST", "/v1/chat/completions", &chat).await;
    let fresh = json_of(&fresh);
    assert_eq!(fresh["usage"]["prompt_tokens"], 23, "{fresh}");
    // Choice 1 hit choice 0's blocks; the prompt counts once, as choice 0 found it.
    assert_eq!(details(&fresh), &json!({"cached_tokens": 0}));

    let streamed = json!({"messages": messages, "max_tokens": 2, "stream": true,
                          "stream_options": {"include_usage": true,
                                             "continuous_usage_stats": true}});
    let (_, _, bytes) = call(&h, "POST", "/v1/chat/completions", &streamed.to_string()).await;
    let evs = events(&bytes);
    assert_eq!(
        evs.last().unwrap()["usage"],
        json!({"prompt_tokens": 23, "completion_tokens": 2, "total_tokens": 25,
               "prompt_tokens_details": {"cached_tokens": 16}})
    );
    // The role chunk goes out before the engine's first output: 0 until it is known.
    assert_eq!(details(&evs[0])["cached_tokens"], 0);
    let tokens: Vec<&Value> = evs
        .iter()
        .filter(|e| e["choices"][0]["delta"]["content"] != "")
        .collect();
    assert!(tokens.iter().all(|e| details(e)["cached_tokens"] == 16));

    let (_, _, bytes) = call(
        &h,
        "POST",
        "/v1/responses",
        &json!({"input": content(), "max_output_tokens": 2}).to_string(),
    )
    .await;
    let v = json_of(&bytes);
    assert_eq!(v["usage"]["input_tokens"], 23);
    assert_eq!(
        v["usage"]["input_tokens_details"],
        json!({"cached_tokens": 16, "cache_write_tokens": 0})
    );

    let body = json!({"model": "tiny", "max_tokens": 2, "messages": messages});
    let (_, _, bytes) = call(&h, "POST", "/v1/messages", &body.to_string()).await;
    // Anthropic's split: input + cache read = the prompt.
    let split = json!({"input_tokens": 7, "cache_creation_input_tokens": 0,
                       "cache_read_input_tokens": 16, "output_tokens": 2});
    assert_eq!(json_of(&bytes)["usage"], split);
    let mut streamed = body;
    streamed["stream"] = json!(true);
    let (_, _, bytes) = call(&h, "POST", "/v1/messages", &streamed.to_string()).await;
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let data: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.split_once("\ndata: "))
        .map(|(_, d)| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(data[0]["type"], "message_start");
    assert_eq!(
        data[0]["message"]["usage"],
        json!({"input_tokens": 23, "output_tokens": 0}),
        "message_start: the split is not known before the engine's first output"
    );
    let delta = data.iter().find(|d| d["type"] == "message_delta").unwrap();
    assert_eq!(delta["usage"], split);

    // Every request had the same prompt.
    let added = h.engine.added();
    assert!(added
        .iter()
        .all(|r| r.prompt_token_ids == added[0].prompt_token_ids));
}
