//! The points of a sweep: the swept values (`max_concurrency` or `request_rate`), the
//! servers (labelled base URLs), and where each point's result file lives.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

/// Which setting a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    MaxConcurrency,
    RequestRate,
}

impl Axis {
    /// The result-file key of the swept setting.
    pub fn key(self) -> &'static str {
        match self {
            Axis::MaxConcurrency => "max_concurrency",
            Axis::RequestRate => "request_rate",
        }
    }
}

/// The settings of one point: at most one request in flight limit and one rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Load {
    pub max_concurrency: Option<usize>,
    /// Requests per second; `None` is infinite.
    pub request_rate: Option<f64>,
}

impl Load {
    /// The result file's stem: `c16` for a concurrency sweep, `r2.5` / `rinf` for a rate
    /// sweep.
    pub fn stem(&self, axis: Axis) -> String {
        match axis {
            Axis::MaxConcurrency => match self.max_concurrency {
                Some(n) => format!("c{n}"),
                None => "cinf".into(),
            },
            Axis::RequestRate => match self.request_rate {
                Some(rate) => format!("r{rate}"),
                None => "rinf".into(),
            },
        }
    }

    /// The values of the result file's `max_concurrency` and `request_rate` keys.
    pub fn keys(&self) -> (Value, Value) {
        (
            json!(self.max_concurrency),
            self.request_rate.map_or(json!("inf"), |r| json!(r)),
        )
    }
}

/// `"1,4,16"` -> `[1, 4, 16]` (commas or spaces; each at least 1, no repeats).
pub fn parse_concurrencies(text: &str) -> Result<Vec<usize>, String> {
    let mut values = Vec::new();
    for item in items(text) {
        let n: usize = item.parse().map_err(|_| {
            format!("max_concurrency: {item:?} is not a whole number (e.g. 1,4,16,64)")
        })?;
        if n == 0 {
            return Err("max_concurrency: each value must be at least 1".into());
        }
        if values.contains(&n) {
            return Err(format!("max_concurrency: {n} is given twice"));
        }
        values.push(n);
    }
    if values.is_empty() {
        return Err("max_concurrency: no values (e.g. 1,4,16,64)".into());
    }
    Ok(values)
}

/// `"1,2.5,inf"` -> `[Some(1.0), Some(2.5), None]` (`None`: all requests at once).
pub fn parse_rates(text: &str) -> Result<Vec<Option<f64>>, String> {
    let mut values = Vec::new();
    for item in items(text) {
        let rate: f64 = item
            .parse()
            .map_err(|_| format!("request_rate: {item:?} is not a number (e.g. 1,2,4 or inf)"))?;
        if rate.is_nan() || rate <= 0.0 {
            return Err(format!("request_rate: each value must be > 0, got {item}"));
        }
        let rate = rate.is_finite().then_some(rate);
        if values.contains(&rate) {
            return Err(format!("request_rate: {item} is given twice"));
        }
        values.push(rate);
    }
    if values.is_empty() {
        return Err("request_rate: no values (e.g. 1,2,4)".into());
    }
    Ok(values)
}

fn items(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
}

/// The swept axis and the load of each point, from the two lists as given: the one with
/// several values is swept and the other, if given, must have one value (kept at every
/// point); with one value each, concurrency is the axis.
pub fn loads(concurrency: Option<&str>, rate: Option<&str>) -> Result<(Axis, Vec<Load>), String> {
    let concurrency = concurrency.map(parse_concurrencies).transpose()?;
    let rate = rate.map(parse_rates).transpose()?;
    let axis = match (&concurrency, &rate) {
        (None, None) => {
            return Err(
                "give the values to sweep: --max-concurrency 1,4,16,64 or --request-rate 1,2,4"
                    .into(),
            )
        }
        (Some(c), Some(r)) if c.len() > 1 && r.len() > 1 => {
            return Err(
                "sweep --max-concurrency or --request-rate, not both: the other may have \
                 one value, kept at every point"
                    .into(),
            )
        }
        (Some(_), Some(r)) if r.len() > 1 => Axis::RequestRate,
        (Some(_), _) => Axis::MaxConcurrency,
        (None, Some(_)) => Axis::RequestRate,
    };
    let loads = match axis {
        Axis::MaxConcurrency => {
            let request_rate = rate.and_then(|r| r[0]);
            let values = concurrency.unwrap_or_default();
            values
                .into_iter()
                .map(|n| Load {
                    max_concurrency: Some(n),
                    request_rate,
                })
                .collect()
        }
        Axis::RequestRate => {
            let max_concurrency = concurrency.map(|c| c[0]);
            let values = rate.unwrap_or_default();
            values
                .into_iter()
                .map(|request_rate| Load {
                    max_concurrency,
                    request_rate,
                })
                .collect()
        }
    };
    Ok((axis, loads))
}

/// A label names a directory: letters, digits, `.`, `_`, `-`, not starting with `.`.
pub fn check_label(label: &str) -> Result<(), String> {
    let ok = !label.is_empty()
        && !label.starts_with('.')
        && label
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "label {label:?}: use letters, digits, '.', '_' and '-' (it names the \
             result directory), not starting with '.'"
        ))
    }
}

/// The default label of a server: its host and port (`127.0.0.1_8000`).
pub fn default_label(base_url: &str) -> String {
    let rest = base_url
        .split_once("://")
        .map_or(base_url, |(_, rest)| rest);
    let host = rest.split('/').next().unwrap_or(rest);
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches(['.', '_'])
        .to_string()
}

/// Labels for `base_urls`: the given ones (one per URL, distinct) or the defaults.
pub fn labels(base_urls: &[String], given: &[String]) -> Result<Vec<String>, String> {
    let labels: Vec<String> = if given.is_empty() {
        base_urls.iter().map(|u| default_label(u)).collect()
    } else if given.len() == base_urls.len() {
        given.to_vec()
    } else {
        return Err(format!(
            "{} --label values for {} --base-url values: give one label per server, in \
             the same order",
            given.len(),
            base_urls.len()
        ));
    };
    for (i, label) in labels.iter().enumerate() {
        check_label(label)?;
        if labels[..i].contains(label) {
            return Err(format!(
                "label {label:?} is given to two servers; each needs its own"
            ));
        }
    }
    Ok(labels)
}

/// `<output_dir>/<label>/<stem>.json`.
pub fn result_path(output_dir: &Path, label: &str, stem: &str) -> PathBuf {
    output_dir.join(label).join(format!("{stem}.json"))
}
