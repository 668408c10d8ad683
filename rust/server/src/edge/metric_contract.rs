//! The metric contract: every `/metrics` family's name, type, help text, label names and
//! bucket bounds, compiled in from `server/contracts/metrics.json`, the file the Python
//! server reads too (`server/edge/metric_contract.py`). [`super::metrics`] and
//! [`super::vllm_metrics`] write each `# HELP` / `# TYPE` line and bucket bound from here;
//! the tests below check that the text they write is the file's, family by family.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use serde::Deserialize;

const FILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../server/contracts/metrics.json"
));

/// One family (`buckets`: a key of the file's bucket table, histograms only).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Family {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub help: String,
    pub labels: Vec<String>,
    #[serde(default)]
    pub buckets: Option<String>,
    /// Token-count bounds above the model's context length are left out.
    #[serde(default)]
    pub capped_at_max_model_len: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Contract {
    #[allow(dead_code)]
    about: String,
    endpoints: Vec<String>,
    buckets: BTreeMap<String, Vec<String>>,
    families: Vec<Family>,
}

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    serde_json::from_str(FILE).expect("server/contracts/metrics.json (compiled in) parses")
});

/// The family `name`; `None` only for a name missing from the file (the tests below
/// render every family, so that fails there).
pub fn family(name: &str) -> Option<&'static Family> {
    CONTRACT.families.iter().find(|f| f.name == name)
}

/// The `endpoint` label's value for a request to `path`: the path when the file lists it,
/// else `other`.
pub fn endpoint_label(path: &str) -> &'static str {
    CONTRACT
        .endpoints
        .iter()
        .find(|e| *e == path)
        .map_or("other", String::as_str)
}

/// A histogram's bounds: the `le` labels as written and their values.
pub struct Buckets {
    pub labels: &'static [String],
    pub bounds: Vec<f64>,
}

/// The buckets of histogram `name`, in order.
pub fn buckets(name: &str) -> Buckets {
    let labels = family(name)
        .and_then(|f| f.buckets.as_ref())
        .and_then(|key| CONTRACT.buckets.get(key))
        .map_or(&[][..], Vec::as_slice);
    let bounds = labels
        .iter()
        .map(|l| l.parse().unwrap_or(f64::MAX))
        .collect();
    Buckets { labels, bounds }
}

/// The `# HELP` and `# TYPE` lines of `name`.
pub fn header(out: &mut String, name: &str) {
    if let Some(f) = family(name) {
        let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {}", f.help, f.kind);
    }
}

#[cfg(test)]
mod tests;
