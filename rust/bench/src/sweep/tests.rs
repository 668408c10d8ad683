//! Unit tests of `sweep.rs`: points, labels, SLOs, stop reasons, resume and the CSV.

use std::time::{Duration, UNIX_EPOCH};

use serde_json::json;

use super::point::{labels, loads, parse_rates, Axis, Load};
use super::stop::{stop_reason, Slo, Stat};
use super::summary::{complete_result, csv, results, write_json, COLUMNS};
use super::*;
use crate::args::Metric;

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("not an object"),
    }
}

#[test]
fn concurrency_list_is_the_axis() {
    let (axis, points) = loads(Some("1,4, 16 64"), None).unwrap();
    assert_eq!(axis, Axis::MaxConcurrency);
    let values: Vec<_> = points.iter().map(|l| l.max_concurrency).collect();
    assert_eq!(values, [Some(1), Some(4), Some(16), Some(64)]);
    assert!(points.iter().all(|l| l.request_rate.is_none()));
    assert_eq!(points[2].stem(axis), "c16");
}

#[test]
fn rate_list_with_a_fixed_concurrency() {
    let (axis, points) = loads(Some("8"), Some("0.5,2,inf")).unwrap();
    assert_eq!(axis, Axis::RequestRate);
    let stems: Vec<_> = points.iter().map(|l| l.stem(axis)).collect();
    assert_eq!(stems, ["r0.5", "r2", "rinf"]);
    assert!(points.iter().all(|l| l.max_concurrency == Some(8)));
    assert_eq!(points[2].keys(), (json!(8), json!("inf")));
}

#[test]
fn bad_point_lists_are_refused() {
    for (c, r, says) in [
        (None, None, "give the values"),
        (Some("1,2"), Some("1,2"), "not both"),
        (Some("0,4"), None, "at least 1"),
        (Some("4,x"), None, "not a whole number"),
        (Some("4,4"), None, "given twice"),
        (None, Some("-1"), "must be > 0"),
        (None, Some(""), "no values"),
    ] {
        let err = loads(c, r).unwrap_err();
        assert!(err.contains(says), "{c:?} {r:?}: {err}");
    }
    assert!(parse_rates("inf,inf").unwrap_err().contains("twice"));
}

#[test]
fn labels_default_to_host_and_port_and_must_be_names() {
    let urls = vec!["http://127.0.0.1:8000".to_string(), "https://h:1/x".into()];
    assert_eq!(labels(&urls, &[]).unwrap(), ["127.0.0.1_8000", "h_1"]);
    let given = vec!["rust".to_string(), "python".into()];
    assert_eq!(labels(&urls, &given).unwrap(), given);
    assert!(labels(&urls, &given[..1])
        .unwrap_err()
        .contains("one label per server"));
    let twice = vec!["a".to_string(), "a".into()];
    assert!(labels(&urls, &twice).unwrap_err().contains("two servers"));
    for bad in ["../x", "a/b", ".hidden", ""] {
        let err = labels(&urls[..1], &[bad.to_string()]).unwrap_err();
        assert!(err.contains("names the result directory"), "{bad}: {err}");
    }
}

#[test]
fn slos_parse_to_result_keys() {
    let slo = Slo::parse("ttft:500").unwrap();
    assert_eq!(
        (slo.stat, slo.metric, slo.ms),
        (Stat::Median, Metric::Ttft, 500.0)
    );
    assert_eq!(slo.key(), "median_ttft_ms");
    assert_eq!(Slo::parse("p99_itl:50").unwrap().key(), "p99_itl_ms");
    assert_eq!(Slo::parse("p99.9_e2el:9").unwrap().key(), "p99.9_e2el_ms");
    assert_eq!(
        Slo::parse(" mean_tpot : 20 ").unwrap().key(),
        "mean_tpot_ms"
    );
    for (bad, says) in [
        ("ttft", "no ':MS'"),
        ("ttft:fast", "not a number"),
        ("ttft:0", "> 0"),
        ("latency:5", "unknown metric"),
        ("max_ttft:5", "unknown statistic"),
        ("p101_ttft:5", "within 0..100"),
    ] {
        let err = Slo::parse(bad).unwrap_err();
        assert!(
            err.contains(says) && err.contains("[STAT_]METRIC:MS"),
            "{bad}: {err}"
        );
    }
}

#[test]
fn stop_on_failures_and_on_slos() {
    let ok = object(
        json!({"completed": 96, "failed": 4, "median_ttft_ms": 120.0,
                           "p99_ttft_ms": 700.0}),
    );
    assert_eq!(stop_reason(&ok, 0.05, &[]), None);
    let reason = stop_reason(&ok, 0.03, &[]).unwrap();
    assert!(reason.contains("4 of 100 requests failed"), "{reason}");
    let none = object(json!({"completed": 0, "failed": 10}));
    assert_eq!(
        stop_reason(&none, 1.0, &[]).unwrap(),
        "no request succeeded"
    );
    let median = [Slo::parse("ttft:500").unwrap()];
    assert_eq!(stop_reason(&ok, 0.05, &median), None);
    let p99 = [
        Slo::parse("ttft:500").unwrap(),
        Slo::parse("p99_ttft:500").unwrap(),
    ];
    let reason = stop_reason(&ok, 0.05, &p99).unwrap();
    assert!(
        reason.starts_with("p99_ttft_ms 700.00 ms > 500 ms"),
        "{reason}"
    );
}

const SERVE: &str = r#"{"num_prompts": 8, "metric_percentiles": [50]}"#;

fn doc(serve: &str, extra: &str) -> String {
    format!(
        r#"{{"base_urls": ["http://127.0.0.1:1", "http://127.0.0.1:2"],
            "labels": ["rust", "python"], "max_concurrency": "1,4", "output_dir": "/o",
            "serve": {serve}{extra}}}"#
    )
}

#[test]
fn a_sweep_is_every_server_at_every_load() {
    let sweep = Sweep::from_json(&doc(SERVE, r#", "stop_at_slo": ["ttft:5 p90_itl:9"]"#)).unwrap();
    let points: Vec<_> = sweep
        .points
        .iter()
        .map(|p| {
            (
                p.label.as_str(),
                p.load.max_concurrency,
                p.path.display().to_string(),
            )
        })
        .collect();
    assert_eq!(
        points,
        [
            ("rust", Some(1), "/o/rust/c1.json".to_string()),
            ("rust", Some(4), "/o/rust/c4.json".into()),
            ("python", Some(1), "/o/python/c1.json".into()),
            ("python", Some(4), "/o/python/c4.json".into()),
        ]
    );
    let args = &sweep.points[3].args;
    assert_eq!(args.base_url, "http://127.0.0.1:2");
    assert_eq!(args.label.as_deref(), Some("python"));
    assert_eq!(args.num_prompts, 8);
    // the CSV's p99 and the SLO's p90 are reported, as well as the asked p50
    assert_eq!(args.metric_percentiles, [50.0, 99.0, 90.0]);
    assert!(sweep.resume && sweep.slos.len() == 2);
}

#[test]
fn a_sweep_refuses_per_point_keys_and_bad_serve_settings() {
    let err = Sweep::from_json(&doc(r#"{"label": "x"}"#, "")).unwrap_err();
    assert!(err.contains("serve.label"), "{err}");
    let err = Sweep::from_json(&doc(r#"{"num_prompts": 0}"#, "")).unwrap_err();
    assert!(err.contains("num_prompts"), "{err}");
    let err = Sweep::from_json(&doc(SERVE, r#", "max_failed_ratio": 2"#)).unwrap_err();
    assert!(err.contains("max_failed_ratio"), "{err}");
    let text = doc(
        r#"{"percentile_metrics": ["ttft"]}"#,
        r#", "stop_at_slo": ["tpot:5"]"#,
    );
    let err = Sweep::from_json(&text).unwrap_err();
    assert!(err.contains("add it to --percentile-metrics"), "{err}");
}

fn result(label: &str, concurrency: usize, ttft: f64) -> Map<String, Value> {
    object(json!({
        "date": "20261207-120000", "label": label, "max_concurrency": concurrency,
        "request_rate": "inf", "duration": 1.5, "completed": 8, "failed": 0,
        "request_throughput": 5.25, "output_throughput": 84.0, "median_ttft_ms": ttft,
        "p99_ttft_ms": ttft * 2.0, "error_samples": [],
    }))
}

#[test]
fn resume_keeps_only_a_complete_result_of_the_same_point() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rust").join("c4.json");
    let keys = Load {
        max_concurrency: Some(4),
        request_rate: None,
    }
    .keys();
    assert!(
        complete_result(&path, "rust", &keys).is_none(),
        "no file yet"
    );
    write_json(&path, &result("rust", 4, 10.0)).unwrap();
    assert!(!path.with_extension("json.partial").exists());
    assert_eq!(
        complete_result(&path, "rust", &keys).unwrap()["median_ttft_ms"],
        10.0
    );
    assert!(
        complete_result(&path, "python", &keys).is_none(),
        "another label's"
    );
    let other = Load {
        max_concurrency: Some(16),
        request_rate: None,
    };
    assert!(
        complete_result(&path, "rust", &other.keys()).is_none(),
        "another point's"
    );
    let mut partial = result("rust", 4, 10.0);
    partial.remove("duration");
    write_json(&path, &partial).unwrap();
    assert!(
        complete_result(&path, "rust", &keys).is_none(),
        "no duration"
    );
    std::fs::write(&path, "{\"completed\": 8, \"dur").unwrap();
    assert!(complete_result(&path, "rust", &keys).is_none(), "cut short");
}

#[test]
fn the_csv_has_a_row_per_result_file_in_sweep_order() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path();
    for (label, c) in [("rust", 16), ("rust", 4), ("python", 4), ("other", 1)] {
        write_json(
            &out.join(label).join(format!("c{c}.json")),
            &result(label, c, 1.5),
        )
        .unwrap();
    }
    std::fs::write(out.join("rust").join("notes.txt"), "not a result").unwrap();
    std::fs::write(out.join("rust").join("c64.json"), "{").unwrap();
    let order = vec!["rust".to_string(), "python".into()];
    let rows = results(out, &order);
    let text = csv(&rows);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], COLUMNS.join(","));
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[1].starts_with("rust,4,inf,5.25,84.0,1.5,3.0,,"),
        "{}",
        lines[1]
    );
    assert!(lines[1].ends_with(",8,0"), "{}", lines[1]);
    assert!(lines[2].starts_with("rust,16,"));
    assert!(lines[3].starts_with("python,4,"));
    assert!(
        lines[4].starts_with("other,1,"),
        "labels not swept now come last"
    );
}

#[test]
fn csv_cells_quote_what_needs_it() {
    let row = object(json!({"label": "a,\"b\"", "completed": 1}));
    let text = csv(&[row]);
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("\"a,\"\"b\"\"\",,,"),
        "{text}"
    );
}

#[test]
fn utc_dates_are_civil() {
    assert_eq!(utc_date(UNIX_EPOCH), "19700101-000000");
    // 2024-02-29 23:59:59 UTC
    let leap = UNIX_EPOCH + Duration::from_secs(1_709_251_199);
    assert_eq!(utc_date(leap), "20240229-235959");
    let later = UNIX_EPOCH + Duration::from_secs(1_796_644_800);
    assert_eq!(utc_date(later), "20261207-120000");
}

#[test]
fn stored_numbers_come_back_exactly() {
    // without serde_json's float_roundtrip this reads back one ulp off
    let dir = tempfile::tempdir().unwrap();
    let mut stored = result("rust", 4, 1.5);
    let throughput = 407.509_171_503_291_16_f64;
    stored.insert("request_throughput".into(), json!(throughput));
    write_json(&dir.path().join("rust").join("c4.json"), &stored).unwrap();
    let rows = results(dir.path(), &[]);
    assert_eq!(rows[0]["request_throughput"].as_f64(), Some(throughput));
    let text = csv(&rows);
    assert!(text.contains(&format!(",{},", json!(throughput))), "{text}");
}
