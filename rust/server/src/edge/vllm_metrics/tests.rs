use super::*;

fn rendered(m: &VllmMetrics, stats: &[(u32, SchedulerStats)]) -> String {
    let mut out = String::new();
    m.render(&mut out, "de\"mo", 100, stats);
    out
}

fn has(text: &str, line: &str) {
    assert!(
        text.lines().any(|l| l == line),
        "missing {line:?} in\n{text}"
    );
}

#[test]
fn engine_state_comes_from_scheduler_stats() {
    let stats = SchedulerStats {
        num_running: 2,
        num_waiting: 1,
        kv_cache_usage: 0.25,
        prefix_cache_queries: 8,
        prefix_cache_hits: 3,
        num_preemptions: 4,
        ..SchedulerStats::default()
    };
    let text = rendered(&VllmMetrics::default(), &[(1, stats)]);
    let l = "model_name=\"de\\\"mo\",engine=\"1\"";
    has(&text, "# TYPE vllm:num_requests_running gauge");
    has(&text, &format!("vllm:num_requests_running{{{l}}} 2"));
    has(&text, &format!("vllm:num_requests_waiting{{{l}}} 1"));
    has(&text, &format!("vllm:kv_cache_usage_perc{{{l}}} 0.25"));
    has(&text, &format!("vllm:gpu_cache_usage_perc{{{l}}} 0.25"));
    has(&text, "# TYPE vllm:prefix_cache_queries counter");
    has(&text, &format!("vllm:prefix_cache_queries_total{{{l}}} 8"));
    has(&text, &format!("vllm:prefix_cache_hits_total{{{l}}} 3"));
    has(&text, &format!("vllm:num_preemptions_total{{{l}}} 4"));
    // An engine with stats gets every per-request series, at zero.
    has(&text, &format!("vllm:generation_tokens_total{{{l}}} 0"));
    has(
        &text,
        &format!("vllm:request_success_total{{{l},finished_reason=\"abort\"}} 0"),
    );
    has(
        &text,
        &format!("vllm:e2e_request_latency_seconds_count{{{l}}} 0"),
    );
}

#[test]
fn requests_are_counted_per_engine() {
    let m = VllmMetrics::default();
    m.first_token(0, 7, 0.003);
    m.generated(0, 1, None);
    m.generated(0, 2, Some(0.02));
    m.finished(
        0,
        &Finished {
            reason: "length",
            e2e: 0.4,
            decode: Some(0.02),
            prefill: Some(0.05),
            prompt_tokens: 7,
            generation_tokens: 3,
        },
    );
    m.max_generation(0, 3);
    m.queue(0, 0.2);
    m.prefill(0, 0.05);
    m.generated(1, 5, None);
    let text = rendered(&m, &[]);
    let l = "model_name=\"de\\\"mo\",engine=\"0\"";
    has(&text, &format!("vllm:prompt_tokens_total{{{l}}} 7"));
    has(&text, &format!("vllm:generation_tokens_total{{{l}}} 3"));
    has(
        &text,
        "vllm:generation_tokens_total{model_name=\"de\\\"mo\",engine=\"1\"} 5",
    );
    has(
        &text,
        &format!("vllm:request_success_total{{{l},finished_reason=\"length\"}} 1"),
    );
    has(
        &text,
        &format!("vllm:request_success_total{{{l},finished_reason=\"stop\"}} 0"),
    );
    has(&text, "# TYPE vllm:time_to_first_token_seconds histogram");
    has(
        &text,
        &format!("vllm:time_to_first_token_seconds_bucket{{{l},le=\"0.001\"}} 0"),
    );
    has(
        &text,
        &format!("vllm:time_to_first_token_seconds_bucket{{{l},le=\"0.005\"}} 1"),
    );
    has(
        &text,
        &format!("vllm:inter_token_latency_seconds_bucket{{{l},le=\"0.025\"}} 1"),
    );
    has(
        &text,
        &format!("vllm:inter_token_latency_seconds_sum{{{l}}} 0.02"),
    );
    has(
        &text,
        &format!("vllm:e2e_request_latency_seconds_count{{{l}}} 1"),
    );
    has(
        &text,
        &format!("vllm:request_decode_time_seconds_count{{{l}}} 1"),
    );
    has(
        &text,
        &format!("vllm:request_queue_time_seconds_bucket{{{l},le=\"0.3\"}} 1"),
    );
    has(&text, "# TYPE vllm:request_prefill_time_seconds histogram");
    has(
        &text,
        &format!("vllm:request_prefill_time_seconds_sum{{{l}}} 0.05"),
    );
    // Inference = prefill + decode.
    has(
        &text,
        &format!("vllm:request_inference_time_seconds_sum{{{l}}} 0.07"),
    );
    // Token-count buckets stop at the context length (100); the rest is +Inf.
    has(
        &text,
        &format!("vllm:request_prompt_tokens_bucket{{{l},le=\"10.0\"}} 1"),
    );
    has(
        &text,
        &format!("vllm:request_prompt_tokens_bucket{{{l},le=\"100.0\"}} 1"),
    );
    assert!(!text.contains(
        "vllm:request_prompt_tokens_bucket{model_name=\"de\\\"mo\",engine=\"0\",le=\"200.0\"}"
    ));
    has(
        &text,
        &format!("vllm:request_max_num_generation_tokens_sum{{{l}}} 3.0"),
    );
    assert!(text.ends_with('\n'));
}

#[test]
fn the_last_sibling_reports_the_most_tokens() {
    let siblings = Siblings::new(3);
    assert_eq!(siblings.done(4), None);
    assert_eq!(siblings.done(9), None);
    assert_eq!(siblings.done(2), Some(9));
}
