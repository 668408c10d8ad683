//! The `percentile_metrics` and `goodput` keys: which latency metrics are reported, and
//! the SLOs a good request meets.

use std::collections::BTreeMap;

use super::Backend;

/// A per-request latency metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Metric {
    Ttft,
    Tpot,
    Itl,
    E2el,
}

impl Metric {
    pub const ALL: [Metric; 4] = [Metric::Ttft, Metric::Tpot, Metric::Itl, Metric::E2el];

    pub fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::Tpot => "tpot",
            Metric::Itl => "itl",
            Metric::E2el => "e2el",
        }
    }

    pub fn parse(name: &str) -> Option<Metric> {
        Metric::ALL.into_iter().find(|m| m.key() == name)
    }

    /// Whether `backend`'s requests measure it: a pooling request streams no tokens, so
    /// only its E2EL exists.
    fn measured_by(self, backend: Backend) -> bool {
        self == Metric::E2el || !backend.pooling()
    }
}

/// The metrics to report: the given names (duplicates dropped), or by default every
/// metric `backend` measures (vLLM's default for pooling backends: e2el).
pub fn percentile_metrics(
    names: Option<&[String]>,
    backend: Backend,
) -> Result<Vec<Metric>, String> {
    let Some(names) = names else {
        let all = Metric::ALL.into_iter();
        return Ok(all.filter(|m| m.measured_by(backend)).collect());
    };
    let mut metrics = Vec::new();
    for name in names {
        let metric = Metric::parse(name.trim()).ok_or_else(|| {
            format!(
                "percentile_metrics: unknown metric {name:?} (choose from ttft, tpot, itl, e2el)"
            )
        })?;
        if !metric.measured_by(backend) {
            return Err(unmeasured("percentile_metrics", metric, backend));
        }
        if !metrics.contains(&metric) {
            metrics.push(metric);
        }
    }
    Ok(metrics)
}

/// vLLM's `--goodput`: SLOs in milliseconds on TTFT, TPOT or E2EL, sorted by metric.
pub fn goodput(
    slos: BTreeMap<String, f64>,
    backend: Backend,
) -> Result<Vec<(Metric, f64)>, String> {
    let mut out = Vec::new();
    for (name, ms) in slos {
        let metric = match Metric::parse(&name) {
            Some(m @ (Metric::Ttft | Metric::Tpot | Metric::E2el)) => m,
            _ => {
                return Err(format!(
                    "goodput: unknown SLO {name:?} (choose from ttft, tpot, e2el)"
                ))
            }
        };
        if !metric.measured_by(backend) {
            return Err(unmeasured("goodput", metric, backend));
        }
        if !(ms.is_finite() && ms > 0.0) {
            return Err(format!(
                "goodput: {name} must be a positive number of ms, got {ms}"
            ));
        }
        out.push((metric, ms));
    }
    out.sort_by_key(|(m, _)| *m);
    Ok(out)
}

fn unmeasured(key: &str, metric: Metric, backend: Backend) -> String {
    format!(
        "{key}: {} is not measured with backend {} (a pooling request streams no tokens); \
         use e2el",
        metric.key(),
        backend.name()
    )
}
