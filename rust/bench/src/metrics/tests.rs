use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6 * b.abs().max(1.0)
}

#[track_caller]
fn assert_close(actual: f64, expected: f64) {
    assert!(close(actual, expected), "{actual} != {expected}");
}

fn ok(prompt_len: usize, output_tokens: usize, ttft: f64, itl: &[f64]) -> RequestRecord {
    RequestRecord {
        success: true,
        prompt_len,
        start: 0.0,
        output_tokens,
        ttft,
        latency: ttft + itl.iter().sum::<f64>(),
        itl: itl.to_vec(),
        error: None,
        retries: 0,
        cached_tokens: None,
    }
}

fn failed(message: &str) -> RequestRecord {
    RequestRecord {
        prompt_len: 99,
        error: Some(message.into()),
        ..Default::default()
    }
}

/// A: 5 tokens every 100 ms after a 100 ms TTFT; B: a single token; C: 3 tokens with a
/// 300 ms stall; D: failed. Expected values are numpy's.
fn timeline() -> Vec<RequestRecord> {
    vec![
        ok(10, 5, 0.1, &[0.1, 0.1, 0.1, 0.1]),
        ok(20, 1, 0.2, &[]),
        ok(30, 3, 0.05, &[0.3, 0.1]),
        failed("HTTP 500: boom"),
    ]
}

#[test]
fn percentiles_interpolate_like_numpy() {
    let sorted = [1.0, 2.0, 3.0, 4.0, 10.0];
    assert_close(percentile(&sorted, 99.0), 9.76);
    assert_close(percentile(&sorted, 90.0), 7.6);
    assert_close(percentile(&sorted, 50.0), 3.0);
    assert_close(percentile(&sorted, 25.0), 2.0);
    assert_close(percentile(&sorted, 99.9), 9.976);
    assert_close(percentile(&sorted, 0.0), 1.0);
    assert_close(percentile(&sorted, 100.0), 10.0);
    assert_eq!(percentile(&[7.0], 99.0), 7.0);
    assert_eq!(percentile(&[], 99.0), 0.0);
}

#[test]
fn stats_sort_and_use_population_std() {
    let s = stats(&[10.0, 1.0, 4.0, 3.0, 2.0], &[50.0, 99.0]);
    assert_close(s.mean, 4.0);
    assert_close(s.median, 3.0);
    assert_close(s.std, 3.1622776601683795);
    assert_eq!(s.percentiles.len(), 2);
    assert_close(s.percentiles[1].1, 9.76);
    let two = stats(&[5.0, 1.0], &[99.0]);
    assert_close(two.median, 3.0);
    assert_close(two.std, 2.0);
    assert_close(two.percentiles[0].1, 4.96);
    let none = stats(&[], &[99.0]);
    assert_eq!(
        (none.mean, none.median, none.std, none.percentiles[0].1),
        (0.0, 0.0, 0.0, 0.0)
    );
}

#[test]
fn tpot_edge_cases() {
    let record = ok(1, 5, 0.1, &[0.1, 0.1, 0.1, 0.1]);
    assert_close(record.tpot().unwrap(), 0.1);
    assert_eq!(ok(1, 1, 0.2, &[]).tpot(), None, "one token: no TPOT");
    assert_eq!(ok(1, 0, 0.2, &[]).tpot(), None, "no tokens: no TPOT");
    // Two tokens: the one gap is the TPOT.
    assert_close(ok(1, 2, 0.2, &[0.05]).tpot().unwrap(), 0.05);
    // Usage may report more tokens than chunks (several tokens per chunk).
    let mut batched = ok(1, 9, 0.1, &[0.4]);
    batched.latency = 0.5;
    assert_close(batched.tpot().unwrap(), 0.05);
}

#[test]
fn report_on_a_synthetic_timeline() {
    let all = Metric::ALL.to_vec();
    let mut records = timeline();
    records[0].retries = 1; // sent again on a new connection: still a success
    let report = Report::new(&records, 2.0, &all, &[50.0, 99.0], None);
    assert_eq!((report.completed, report.failed, report.retried), (3, 1, 1));
    assert_eq!(
        (report.total_input_tokens, report.total_output_tokens),
        (60, 9)
    );
    assert_close(report.request_throughput, 1.5);
    assert_close(report.output_throughput, 4.5);
    assert_close(report.total_token_throughput, 34.5);
    assert_eq!(report.request_goodput, None);
    let by = |m: Metric| &report.metrics.iter().find(|(k, _)| *k == m).unwrap().1;
    let ttft = by(Metric::Ttft);
    assert_close(ttft.mean, 116.66666666666667);
    assert_close(ttft.median, 100.0);
    assert_close(ttft.std, 62.36095644623236);
    assert_close(ttft.percentiles[1].1, 198.0);
    let tpot = by(Metric::Tpot); // B (one token) is left out: [100, 200]
    assert_close(tpot.mean, 150.0);
    assert_close(tpot.percentiles[1].1, 199.0);
    let itl = by(Metric::Itl); // every gap of every request
    assert_close(itl.mean, 800.0 / 6.0);
    assert_close(itl.median, 100.0);
    assert_close(itl.percentiles[1].1, 290.0);
    let e2el = by(Metric::E2el);
    assert_close(e2el.median, 450.0);
    assert_close(e2el.mean, 383.3333333333333);
    assert_eq!(report.error_samples, vec!["HTTP 500: boom".to_string()]);
}

#[test]
fn goodput_uses_vllm_semantics() {
    let records = timeline();
    // ttft <= 150 and tpot <= 150: only A (B's TTFT is 200, C's TPOT is 200).
    assert_eq!(
        good_requests(&records, &[(Metric::Ttft, 150.0), (Metric::Tpot, 150.0)]),
        1
    );
    // tpot alone: B counts (a single token has TPOT 0), C does not.
    assert_eq!(good_requests(&records, &[(Metric::Tpot, 150.0)]), 2);
    // e2el: the bound is inclusive (C takes exactly 450 ms), A's 500 ms misses.
    assert_eq!(good_requests(&records, &[(Metric::E2el, 450.0)]), 2);
    // A failed request is never good, however loose the SLO.
    assert_eq!(good_requests(&records, &[(Metric::E2el, 1e9)]), 3);
    let slos = [(Metric::Ttft, 150.0), (Metric::Tpot, 150.0)];
    let report = Report::new(&records, 2.0, &[], &[99.0], Some(&slos));
    assert_close(report.request_goodput.unwrap(), 0.5);
}

#[test]
fn json_uses_vllm_key_names() {
    let report = Report::new(
        &timeline(),
        2.0,
        &[Metric::Ttft, Metric::E2el],
        &[50.0, 99.9],
        Some(&[]),
    );
    let json = report.to_json();
    for key in [
        "duration",
        "completed",
        "failed",
        "retried_requests",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "total_input_tokens",
        "total_output_tokens",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p99.9_ttft_ms",
        "mean_e2el_ms",
        "p99.9_e2el_ms",
    ] {
        assert!(json.contains_key(key), "missing {key}");
    }
    assert!(
        !json.contains_key("mean_tpot_ms"),
        "only selected metrics are reported"
    );
    assert_eq!(json["completed"], 3);
    assert_eq!(
        json["request_goodput"], 1.5,
        "no SLO: every completed request is good"
    );
    let plain = Report::new(&timeline(), 2.0, &[], &[99.0], None).to_json();
    assert!(!plain.contains_key("request_goodput"));
}

#[test]
fn a_pooling_report_has_vllms_pooling_keys() {
    // Embeddings: no output, TTFT = E2EL; input counts are the server's.
    let embedded = |prompt_len: usize, latency: f64| RequestRecord {
        success: true,
        prompt_len,
        ttft: latency,
        latency,
        ..Default::default()
    };
    let records = vec![
        embedded(10, 0.01),
        embedded(30, 0.03),
        embedded(20, 0.02),
        failed("HTTP 400: too long"),
    ];
    let report = Report::new(&records, 2.0, &[Metric::E2el], &[50.0, 99.0], None).pooling();
    let json = report.to_json();
    assert_eq!(json["completed"], 3);
    assert_eq!(json["failed"], 1);
    assert_eq!(json["total_input_tokens"], 60);
    assert_eq!(json["total_input_sequences"], 3);
    assert_eq!(json["total_output_tokens"], 0);
    assert_close(json["request_throughput"].as_f64().unwrap(), 1.5);
    assert_close(json["input_sequence_throughput"].as_f64().unwrap(), 1.5);
    assert_close(json["total_token_throughput"].as_f64().unwrap(), 30.0);
    assert_close(json["mean_e2el_ms"].as_f64().unwrap(), 20.0);
    assert_close(json["median_e2el_ms"].as_f64().unwrap(), 20.0);
    assert_close(json["std_e2el_ms"].as_f64().unwrap(), 8.16496580927726);
    assert_close(json["p99_e2el_ms"].as_f64().unwrap(), 29.8);
    for key in [
        "output_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "mean_ttft_ms",
    ] {
        assert!(!json.contains_key(key), "{key}");
    }
    let generation = Report::new(&records, 2.0, &[Metric::E2el], &[99.0], None).to_json();
    assert!(!generation.contains_key("total_input_sequences"));
    assert!(generation.contains_key("output_throughput"));
}
