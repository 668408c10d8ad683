//! When a sweep stops early for a server: too many failed requests at a point, or a
//! latency past an SLO (`--stop-at-slo`).
//!
//! An SLO is `[STAT_]METRIC:MS`: METRIC is ttft, tpot, itl or e2el; STAT is `median`
//! (the default), `mean` or a percentile `pN` (`p99`, `p99.9`). It names the result key
//! `STAT_METRIC_ms`: `ttft:500` is `median_ttft_ms` > 500 ms, `p99_itl:50` is
//! `p99_itl_ms` > 50 ms.

use serde_json::{Map, Value};

use crate::args::Metric;
use crate::metrics::percentile_word;

/// Which summary of a metric an SLO bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stat {
    Median,
    Mean,
    Percentile(f64),
}

/// One `--stop-at-slo` bound.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    pub stat: Stat,
    pub metric: Metric,
    pub ms: f64,
}

impl Slo {
    /// Parses `[STAT_]METRIC:MS`.
    pub fn parse(text: &str) -> Result<Slo, String> {
        let bad = |why: &str| {
            format!(
                "stop_at_slo {text:?}: {why}; write [STAT_]METRIC:MS, e.g. ttft:500 (median), \
                 p99_ttft:2000, mean_tpot:50 (METRIC: ttft, tpot, itl, e2el; STAT: median, \
                 mean or pN)"
            )
        };
        let (name, ms) = text.trim().split_once(':').ok_or_else(|| bad("no ':MS'"))?;
        let ms: f64 = ms
            .trim()
            .parse()
            .map_err(|_| bad("the bound is not a number"))?;
        if !ms.is_finite() || ms <= 0.0 {
            return Err(bad("the bound must be > 0 ms"));
        }
        let name = name.trim();
        let (stat, metric) = match name.rsplit_once('_') {
            Some((stat, metric)) => (stat, metric),
            None => ("median", name),
        };
        let metric = Metric::parse(metric).ok_or_else(|| bad("unknown metric"))?;
        let stat = match stat {
            "median" => Stat::Median,
            "mean" => Stat::Mean,
            p => {
                let value: f64 = p
                    .strip_prefix('p')
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad("unknown statistic"))?;
                if !(0.0..=100.0).contains(&value) {
                    return Err(bad("a percentile is within 0..100"));
                }
                Stat::Percentile(value)
            }
        };
        Ok(Slo { stat, metric, ms })
    }

    /// The result key this bounds: `median_ttft_ms`, `p99_itl_ms`...
    pub fn key(&self) -> String {
        let stat = match self.stat {
            Stat::Median => "median".to_string(),
            Stat::Mean => "mean".to_string(),
            Stat::Percentile(p) => format!("p{}", percentile_word(p)),
        };
        format!("{stat}_{}_ms", self.metric.key())
    }

    /// As written back to the user: `median_ttft:500`.
    pub fn describe(&self) -> String {
        let key = self.key();
        let name = key.strip_suffix("_ms").unwrap_or(&key);
        format!("{name}:{}", self.ms)
    }
}

/// Why the sweep of a server stops after a point with this `result`, or `None` to go on:
/// more than `max_failed_ratio` of its requests failed, or a latency passed an SLO.
pub fn stop_reason(
    result: &Map<String, Value>,
    max_failed_ratio: f64,
    slos: &[Slo],
) -> Option<String> {
    let count = |key: &str| result.get(key).and_then(Value::as_u64).unwrap_or(0);
    let (completed, failed) = (count("completed"), count("failed"));
    let total = completed + failed;
    if total == 0 || completed == 0 {
        return Some("no request succeeded".into());
    }
    let ratio = failed as f64 / total as f64;
    if ratio > max_failed_ratio {
        return Some(format!(
            "{failed} of {total} requests failed ({:.1}% > max-failed-ratio {:.1}%)",
            ratio * 100.0,
            max_failed_ratio * 100.0
        ));
    }
    for slo in slos {
        let key = slo.key();
        if let Some(value) = result.get(&key).and_then(Value::as_f64) {
            if value > slo.ms {
                return Some(format!(
                    "{key} {value:.2} ms > {} ms (stop-at-slo {})",
                    slo.ms,
                    slo.describe()
                ));
            }
        }
    }
    None
}
