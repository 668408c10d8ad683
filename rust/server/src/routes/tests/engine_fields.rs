//! The fields the engine acts on beyond sampling, through the serving router and the fake
//! engine: `priority`, `cache_salt`, `vllm_xargs` + `kv_transfer_params` (as extra args)
//! and a thinking budget (chat's `thinking_token_budget`, Anthropic's
//! `thinking.budget_tokens`) reach every engine request; `priority` needs the priority
//! policy and a budget a reasoning parser.

use super::*;
use crate::state::HttpOptions;
use crate::testutil::Served;

fn options(policy: &'static str, reasoning: Option<&'static str>) -> HttpOptions {
    HttpOptions {
        scheduling_policy: policy,
        reasoning_parser: reasoning,
        ..HttpOptions::default()
    }
}

#[tokio::test]
async fn every_engine_request_carries_the_fields() {
    let h = Harness::with_options(
        vec![5, 6],
        Duration::ZERO,
        options("priority", Some("qwen3")),
    );
    let fields = json!({"max_tokens": 2, "priority": -4, "cache_salt": "t-1",
        "thinking_token_budget": 9, "vllm_xargs": {"x": [1, "y"]},
        "kv_transfer_params": {"do_remote_prefill": false}});
    let mut completion = fields.clone();
    completion["prompt"] = json!(["hello", "world"]);
    completion["n"] = json!(2);
    let (status, _, bytes) = call(&h, "POST", "/v1/completions", &completion.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));
    let mut chat = fields;
    chat["messages"] = json!([{"role": "user", "content": "hello"}]);
    let (status, _, bytes) = call(&h, "POST", "/v1/chat/completions", &chat.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));

    let added = h.engine.added();
    assert_eq!(
        added.len(),
        5,
        "4 choices of the completions request, 1 chat"
    );
    let tokenizer = &h.state.tokenizer;
    let ids = |text: &str| tokenizer.encode(text, false).unwrap();
    let extra = rmpv::Value::Map(vec![
        ("x".into(), rmpv::Value::Array(vec![1.into(), "y".into()])),
        (
            "kv_transfer_params".into(),
            rmpv::Value::Map(vec![("do_remote_prefill".into(), false.into())]),
        ),
    ]);
    for request in &added {
        assert_eq!(request.priority, -4);
        assert_eq!(request.cache_salt.as_deref(), Some("t-1"));
        let sampling = &request.sampling_params;
        assert_eq!(sampling.extra_args.as_ref(), Some(&extra));
        let budget = sampling.thinking_budget.as_ref().unwrap();
        assert_eq!(budget.budget, 9);
        assert_eq!(budget.start_token_ids, vec![ids("<think>")]);
        assert_eq!(budget.end_token_ids, vec![ids("</think>")]);
    }
}

#[tokio::test]
async fn unset_fields_leave_the_wire_at_its_defaults() {
    let h = Harness::with_options(vec![5], Duration::ZERO, options("fcfs", Some("qwen3")));
    let body = json!({"prompt": "hello", "max_tokens": 1, "priority": 0,
                      "thinking_token_budget": -1, "vllm_xargs": {}});
    let (status, _, _) = call(&h, "POST", "/v1/completions", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK);
    let request = &h.engine.added()[0];
    assert_eq!((request.priority, request.cache_salt.as_deref()), (0, None));
    assert_eq!(request.sampling_params.thinking_budget, None);
    assert_eq!(request.sampling_params.extra_args, None);
}

#[tokio::test]
async fn priority_needs_the_policy_and_a_budget_a_reasoning_parser() {
    let h = Harness::with_options(vec![5], Duration::ZERO, options("fcfs", None));
    for (body, param, words) in [
        (
            json!({"prompt": "hello", "priority": 3}),
            "priority",
            "Got priority 3 but Priority scheduling is not enabled",
        ),
        (
            json!({"messages": [{"role": "user", "content": "hello"}],
                   "thinking_token_budget": 3}),
            "thinking_token_budget",
            "needs a reasoning parser",
        ),
    ] {
        let path = if body.get("prompt").is_some() {
            "/v1/completions"
        } else {
            "/v1/chat/completions"
        };
        let (status, _, bytes) = call(&h, "POST", path, &body.to_string()).await;
        let error = &json_of(&bytes)["error"];
        assert_eq!(status, StatusCode::BAD_REQUEST, "{error}");
        assert_eq!(error["param"], param);
        assert!(
            error["message"].as_str().unwrap().contains(words),
            "{error}"
        );
    }
    assert!(h.engine.added().is_empty());
}

#[tokio::test]
async fn anthropic_budget_tokens_become_the_engines_budget() {
    let served = Served {
        model_name: "tiny",
        chat_template: "{% for m in messages %}{{ m.content }} {% endfor %}",
        max_model_len: 4096,
        vocab_size: 11,
    };
    let h = Harness::serving(
        vec![5],
        Duration::ZERO,
        options("fcfs", Some("qwen3")),
        &served,
    );
    let body = json!({"model": "tiny", "max_tokens": 2000,
        "messages": [{"role": "user", "content": "hello"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024}});
    let (status, _, bytes) = call(&h, "POST", "/v1/messages", &body.to_string()).await;
    assert_eq!(status, StatusCode::OK, "{}", json_of(&bytes));
    let budget = h.engine.added()[0].sampling_params.thinking_budget.clone();
    assert_eq!(budget.map(|b| b.budget), Some(1024));
}
