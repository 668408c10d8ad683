//! What `/metrics` writes is `server/contracts/metrics.json`, family by family (the
//! Python twin: `tests/server/test_contracts.py`). The file is read here as plain JSON,
//! not through the loader above.

use std::collections::BTreeMap;

use serde_json::Value;
use vrs_wire::SchedulerStats;

use super::{CONTRACT, FILE};
use crate::edge::metrics::{routed_metrics, Metrics, Rejection};
use crate::edge::vllm_metrics::Finished;

fn file() -> Value {
    serde_json::from_str(FILE).expect("metrics.json is JSON")
}

fn strs(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Every family with at least one sample: two engines, traffic on engine 0.
fn exposition(max_model_len: u64) -> String {
    let m = Metrics::default();
    m.ttft.observe(std::time::Duration::from_millis(3));
    m.request("/v1/completions", 200);
    m.rejected(Rejection::QueueFullTokens);
    let stats = SchedulerStats {
        num_running: 1,
        prefix_cache_queries: 4,
        prefix_cache_hits: 1,
        ..SchedulerStats::default()
    };
    let engines = [(0, stats), (1, SchedulerStats::default())];
    m.vllm.first_token(0, 7, 0.003);
    m.vllm.finished(
        0,
        &Finished {
            reason: "stop",
            e2e: 0.4,
            decode: Some(0.02),
            prefill: Some(0.05),
            prompt_tokens: 7,
            generation_tokens: 3,
        },
    );
    let mut text = m.render(&engines, 2);
    routed_metrics(&mut text, &[(0, 1)]);
    m.vllm.render(&mut text, "demo", max_model_len, &engines);
    text
}

/// Each sample's name and labels (`le` included).
fn samples(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (series, _value) = line.rsplit_once(' ').expect("a sample has a value");
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        let labels = labels
            .trim_end_matches('}')
            .split("\",")
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once("=\""))
            .map(|(k, v)| (k.to_owned(), v.trim_end_matches('"').to_owned()))
            .collect();
        out.push((name.to_owned(), labels));
    }
    out
}

#[test]
fn the_compiled_in_file_parses() {
    assert!(!CONTRACT.families.is_empty());
    for f in &CONTRACT.families {
        if f.kind == "histogram" {
            let b = super::buckets(&f.name);
            assert!(!b.labels.is_empty(), "{} has no buckets", f.name);
            assert!(b.bounds.windows(2).all(|w| w[0] < w[1]), "{}", f.name);
            assert!(b.bounds.iter().all(|b| b.is_finite()), "{}", f.name);
        }
    }
}

#[test]
fn every_family_is_the_files() {
    let file = file();
    let families = file["families"].as_array().expect("families");
    let text = exposition(1_000_000_000_000);
    let lines: Vec<&str> = text.lines().collect();
    let mut heads = Vec::new();
    for pair in lines.windows(2) {
        if let Some(help) = pair[0].strip_prefix("# HELP ") {
            let (name, help) = help.split_once(' ').expect("name and help");
            let kind = pair[1]
                .strip_prefix(&format!("# TYPE {name} "))
                .expect("TYPE after HELP");
            heads.push((name.to_owned(), help.to_owned(), kind.to_owned()));
        }
    }
    let expected: Vec<(String, String, String)> = families
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (s("name"), s("help"), s("type"))
        })
        .collect();
    assert_eq!(heads, expected);
    assert_eq!(text.matches("# TYPE ").count(), heads.len());
    let samples = samples(&text);
    for f in families {
        let name = f["name"].as_str().unwrap_or_default();
        let mut labels = strs(&f["labels"]);
        labels.sort();
        let kind = f["type"].as_str().unwrap_or_default();
        let series: Vec<String> = match kind {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|s| format!("{name}{s}"))
                .collect(),
            "counter" if !name.ends_with("_total") => vec![format!("{name}_total")],
            _ => vec![name.to_owned()],
        };
        let rows: Vec<_> = samples.iter().filter(|(n, _)| series.contains(n)).collect();
        assert!(!rows.is_empty(), "no sample of {name}");
        for (_, row) in &rows {
            let keys: Vec<&String> = row.keys().filter(|k| *k != "le").collect();
            assert_eq!(keys, labels.iter().collect::<Vec<_>>(), "{name}");
        }
        if kind == "histogram" {
            let les: Vec<&str> = rows
                .iter()
                .filter(|(n, l)| {
                    n.ends_with("_bucket") && l.get("engine").map_or(true, |e| e == "0")
                })
                .filter_map(|(_, l)| l.get("le").map(String::as_str))
                .collect();
            let key = f["buckets"].as_str().unwrap_or_default();
            let mut want = strs(&file["buckets"][key]);
            want.push("+Inf".into());
            assert_eq!(les, want, "{name}");
        }
    }
}

#[test]
fn token_count_buckets_stop_at_the_context_length_where_the_file_says() {
    let file = file();
    let text = exposition(100);
    let samples = samples(&text);
    let vllm = file["families"].as_array().expect("families").iter();
    let mut capped = 0;
    for f in vllm.filter(|f| f["type"] == "histogram" && f["labels"][0] == "model_name") {
        let name = f["name"].as_str().unwrap_or_default();
        let cap = f["capped_at_max_model_len"].as_bool().unwrap_or(false);
        capped += usize::from(cap);
        let mut want: Vec<String> = strs(&file["buckets"][f["buckets"].as_str().unwrap_or("")])
            .into_iter()
            .filter(|b| !cap || b.parse::<f64>().is_ok_and(|b| b <= 100.0))
            .collect();
        want.push("+Inf".into());
        let les: Vec<String> = samples
            .iter()
            .filter(|(n, l)| *n == format!("{name}_bucket") && l["engine"] == "0")
            .map(|(_, l)| l["le"].clone())
            .collect();
        assert_eq!(les, want, "{name}");
    }
    assert!(capped > 0);
}

/// Each path the file lists counts under its own `endpoint` label, any other as `other`
/// (the Python twin: `test_the_endpoint_label_values_are_the_files`).
#[test]
fn the_endpoint_label_values_are_the_files() {
    let endpoints = strs(&file()["endpoints"]);
    assert!(endpoints.len() >= 10, "{endpoints:?}");
    let m = Metrics::default();
    for path in endpoints
        .iter()
        .map(String::as_str)
        .chain(["/v1/unknown", "/"])
    {
        m.request(path, 200);
    }
    let text = m.render(&[], 0);
    let prefix = "vrs:http_requests_total{endpoint=\"";
    let mut got: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .collect();
    let mut want: Vec<String> = endpoints
        .iter()
        .map(|e| format!("{e}\",status=\"200\"}} 1"))
        .collect();
    want.push("other\",status=\"200\"} 2".into());
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}
