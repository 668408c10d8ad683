//! The sweep's files: each point's result JSON (written whole or not at all), whether a
//! stored one is complete, and `summary.csv` and `summary.json` (vLLM's sweep plot
//! reads it), rebuilt from every result file under the output directory.

use std::cmp::Ordering;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The CSV's columns: the point, then the headline numbers (result-file keys).
pub const COLUMNS: [&str; 15] = [
    "label",
    "max_concurrency",
    "request_rate",
    "request_throughput",
    "output_throughput",
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "completed",
    "failed",
];

/// Writes `value` to `path` through a temporary file and a rename, so that an interrupted
/// sweep never leaves half a result.
pub fn write_json(path: &Path, value: &Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| format!("cannot encode {}: {e}", path.display()))?;
    let partial = path.with_extension("json.partial");
    fs::write(&partial, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", partial.display()))?;
    fs::rename(&partial, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A stored point result that a resumed sweep may keep: a JSON object with the run's
/// `completed` and `duration`, of this `label` and with these `max_concurrency` and
/// `request_rate` values. `None` when missing, unreadable or another point's.
pub fn complete_result(
    path: &Path,
    label: &str,
    keys: &(Value, Value),
) -> Option<Map<String, Value>> {
    let text = fs::read_to_string(path).ok()?;
    let Ok(Value::Object(result)) = serde_json::from_str::<Value>(&text) else {
        return None;
    };
    let complete = result.get("completed").is_some_and(Value::is_u64)
        && result.get("duration").is_some_and(Value::is_number)
        && result.get("label").and_then(Value::as_str) == Some(label)
        && same_number(result.get("max_concurrency"), &keys.0)
        && same_number(result.get("request_rate"), &keys.1);
    complete.then_some(result)
}

fn same_number(stored: Option<&Value>, expected: &Value) -> bool {
    match (stored, expected) {
        (Some(Value::Number(a)), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (Some(a), b) => a == b,
        (None, _) => false,
    }
}

/// Every result file under `output_dir` (`*/*.json`, complete as above minus the point
/// check), in CSV order: labels in `label_order` first, then the others by name; within
/// a label by concurrency, then rate (inf last).
pub fn results(output_dir: &Path, label_order: &[String]) -> Vec<Map<String, Value>> {
    let mut found = Vec::new();
    for dir in sorted_entries(output_dir)
        .into_iter()
        .filter(|p| p.is_dir())
    {
        for file in sorted_entries(&dir) {
            if file.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            if let Ok(Value::Object(result)) = serde_json::from_str::<Value>(&text) {
                if result.get("completed").is_some_and(Value::is_u64)
                    && result.get("label").is_some_and(Value::is_string)
                {
                    found.push(result);
                }
            }
        }
    }
    let rank = |r: &Map<String, Value>| {
        let label = r.get("label").and_then(Value::as_str).unwrap_or("");
        let position = label_order
            .iter()
            .position(|l| l == label)
            .unwrap_or(label_order.len());
        (position, label.to_string())
    };
    found.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then_with(|| by_load(a, b, "max_concurrency"))
            .then_with(|| by_load(a, b, "request_rate"))
    });
    found
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    paths.sort();
    paths
}

/// Numbers ascending; "inf" and null (no limit) after every number.
fn by_load(a: &Map<String, Value>, b: &Map<String, Value>, key: &str) -> Ordering {
    let value = |r: &Map<String, Value>| r.get(key).and_then(Value::as_f64).unwrap_or(f64::MAX);
    value(a).total_cmp(&value(b))
}

/// One CSV cell: numbers as JSON prints them, strings quoted when they need it, absent
/// keys empty.
fn cell(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.contains([',', '"', '\n']) => {
            format!("\"{}\"", s.replace('"', "\"\""))
        }
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The CSV text: a header of [`COLUMNS`], then one row per result.
pub fn csv(results: &[Map<String, Value>]) -> String {
    let mut text = COLUMNS.join(",") + "\n";
    for result in results {
        let row: Vec<String> = COLUMNS.iter().map(|c| cell(result.get(*c))).collect();
        text += &row.join(",");
        text.push('\n');
    }
    text
}

/// Rebuilds `<output_dir>/summary.csv`, and `<output_dir>/summary.json`: every result
/// whole, as one JSON list, the file vLLM's `vllm bench sweep plot` reads (it gathers
/// `**/summary.json` lists of result maps; `--curve-by label --var-x max_concurrency`).
/// Returns the CSV's path and the number of rows.
pub fn write_csv(output_dir: &Path, label_order: &[String]) -> Result<(PathBuf, usize), String> {
    let rows = results(output_dir, label_order);
    let path = output_dir.join("summary.csv");
    fs::write(&path, csv(&rows)).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let list = Value::Array(rows.iter().cloned().map(Value::Object).collect());
    let json_path = output_dir.join("summary.json");
    let text = serde_json::to_string_pretty(&list)
        .map_err(|e| format!("cannot encode {}: {e}", json_path.display()))?;
    fs::write(&json_path, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", json_path.display()))?;
    Ok((path, rows.len()))
}
