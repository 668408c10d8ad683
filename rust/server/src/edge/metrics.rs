//! `GET /metrics`: Prometheus text format (version 0.0.4), written by hand. Mirrors
//! `server/edge/metrics.py`; each family's type, help text, label names and buckets, and
//! the `endpoint` label's values, are `server/contracts/metrics.json`'s
//! ([`super::metric_contract`]). Frontend metrics are counted here; the engine's come from
//! its latest `SchedulerStats` (label `engine`). vLLM's names (`vllm:*`) come from
//! [`super::vllm_metrics`], always served next to these.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use vrs_wire::SchedulerStats;

use super::metric_contract::{buckets, endpoint_label, header};
use super::vllm_metrics::{float, VllmMetrics};

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Why a generation request was refused or shed for overload (the `reason` label of
/// `vrs:requests_rejected_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// 429: `--max-concurrent-requests` requests in flight.
    MaxConcurrentRequests,
    /// 503: `--max-num-queued-reqs` engine requests queued.
    QueueFullRequests,
    /// 503: `--max-num-queued-tokens` prompt tokens queued.
    QueueFullTokens,
    /// 503 or an SSE error event: queued past `--max-queue-wait`.
    QueueWaitTimeout,
}

impl Rejection {
    pub const ALL: [Self; 4] = [
        Self::MaxConcurrentRequests,
        Self::QueueFullRequests,
        Self::QueueFullTokens,
        Self::QueueWaitTimeout,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::MaxConcurrentRequests => "max_concurrent_requests",
            Self::QueueFullRequests => "queue_full_requests",
            Self::QueueFullTokens => "queue_full_tokens",
            Self::QueueWaitTimeout => "queue_wait_timeout",
        }
    }
}

/// A cumulative histogram with fixed bounds; observing is lock-free.
pub struct Histogram {
    name: &'static str,
    labels: &'static [String],
    bounds: Vec<f64>,
    counts: Vec<AtomicU64>,
    sum_bits: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    fn new(name: &'static str) -> Self {
        let buckets = buckets(name);
        Self {
            name,
            labels: buckets.labels,
            counts: buckets.labels.iter().map(|_| AtomicU64::new(0)).collect(),
            bounds: buckets.bounds,
            sum_bits: AtomicU64::new(0f64.to_bits()),
            count: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, value: Duration) {
        let seconds = value.as_secs_f64();
        if let Some(i) = self.bounds.iter().position(|&b| seconds <= b) {
            self.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        let mut current = self.sum_bits.load(Ordering::Relaxed);
        loop {
            let next = (f64::from_bits(current) + seconds).to_bits();
            match self.sum_bits.compare_exchange_weak(
                current,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String) {
        header(out, self.name);
        let mut running = 0;
        for (label, n) in self.labels.iter().zip(&self.counts) {
            running += n.load(Ordering::Relaxed);
            let _ = writeln!(out, "{}_bucket{{le=\"{label}\"}} {running}", self.name);
        }
        let count = self.count.load(Ordering::Relaxed);
        let sum = f64::from_bits(self.sum_bits.load(Ordering::Relaxed));
        let _ = writeln!(out, "{}_bucket{{le=\"+Inf\"}} {count}", self.name);
        let _ = writeln!(out, "{}_sum {}", self.name, float(sum));
        let _ = writeln!(out, "{}_count {count}", self.name);
    }
}

/// Every metric of one frontend.
pub struct Metrics {
    http: Mutex<BTreeMap<(&'static str, u16), u64>>,
    prompt_tokens: AtomicU64,
    generation_tokens: AtomicU64,
    /// Requests refused or shed, by [`Rejection`] (in `Rejection::ALL`'s order).
    rejected: [AtomicU64; 4],
    pub ttft: Histogram,
    pub itl: Histogram,
    pub e2e: Histogram,
    pub tokenize: Histogram,
    pub detokenize: Histogram,
    /// The `vllm:*` series a vLLM Grafana dashboard queries.
    pub vllm: VllmMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            http: Mutex::new(BTreeMap::new()),
            prompt_tokens: AtomicU64::new(0),
            generation_tokens: AtomicU64::new(0),
            rejected: Default::default(),
            ttft: Histogram::new("vrs:time_to_first_token_seconds"),
            itl: Histogram::new("vrs:inter_token_latency_seconds"),
            e2e: Histogram::new("vrs:e2e_request_latency_seconds"),
            tokenize: Histogram::new("vrs:tokenize_latency_seconds"),
            detokenize: Histogram::new("vrs:detokenize_latency_seconds"),
            vllm: VllmMetrics::default(),
        }
    }
}

impl Metrics {
    /// One answered HTTP request (unknown paths count as `other`).
    pub fn request(&self, path: &str, status: u16) {
        let endpoint = endpoint_label(path);
        if let Ok(mut http) = self.http.lock() {
            *http.entry((endpoint, status)).or_default() += 1;
        }
    }

    pub fn prompt_tokens(&self, n: usize) {
        self.prompt_tokens.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn generation_tokens(&self, n: usize) {
        self.generation_tokens
            .fetch_add(n as u64, Ordering::Relaxed);
    }

    /// One request refused or shed for `reason`.
    pub fn rejected(&self, reason: Rejection) {
        self.rejected[reason as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The text format; `engines` are (index, latest stats).
    pub fn render(&self, engines: &[(u32, SchedulerStats)], in_flight: usize) -> String {
        let mut out = String::with_capacity(8192);
        header(&mut out, "vrs:http_requests_total");
        let http = self.http.lock().map(|h| h.clone()).unwrap_or_default();
        for ((endpoint, status), n) in http {
            let _ = writeln!(
                out,
                "vrs:http_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {n}"
            );
        }
        header(&mut out, "vrs:prompt_tokens_total");
        let prompt = self.prompt_tokens.load(Ordering::Relaxed);
        let _ = writeln!(out, "vrs:prompt_tokens_total {prompt}");
        header(&mut out, "vrs:generation_tokens_total");
        let generation = self.generation_tokens.load(Ordering::Relaxed);
        let _ = writeln!(out, "vrs:generation_tokens_total {generation}");
        header(&mut out, "vrs:requests_in_flight");
        let _ = writeln!(out, "vrs:requests_in_flight {in_flight}");
        header(&mut out, "vrs:requests_rejected_total");
        for (reason, n) in Rejection::ALL.iter().zip(&self.rejected) {
            let _ = writeln!(
                out,
                "vrs:requests_rejected_total{{reason=\"{}\"}} {}",
                reason.as_str(),
                n.load(Ordering::Relaxed)
            );
        }
        for histogram in [
            &self.ttft,
            &self.itl,
            &self.e2e,
            &self.tokenize,
            &self.detokenize,
        ] {
            histogram.render(&mut out);
        }
        engine_metrics(&mut out, engines);
        out
    }
}

type EngineValue = fn(&SchedulerStats) -> String;

/// Engine state from `SchedulerStats`: (name, value).
const ENGINE: &[(&str, EngineValue)] = &[
    ("vrs:num_requests_running", |s| s.num_running.to_string()),
    ("vrs:num_requests_waiting", |s| s.num_waiting.to_string()),
    ("vrs:kv_cache_usage_perc", |s| float(s.kv_cache_usage)),
    ("vrs:prefix_cache_queries_total", |s| {
        s.prefix_cache_queries.to_string()
    }),
    ("vrs:prefix_cache_hits_total", |s| {
        s.prefix_cache_hits.to_string()
    }),
    ("vrs:prefix_cache_hit_rate", |s| {
        float(if s.prefix_cache_queries > 0 {
            s.prefix_cache_hits as f64 / s.prefix_cache_queries as f64
        } else {
            0.0
        })
    }),
    ("vrs:num_preemptions_total", |s| {
        s.num_preemptions.to_string()
    }),
];

/// Appends the data parallel routing counter: requests routed to each (index, count).
pub fn routed_metrics(out: &mut String, routed: &[(u32, usize)]) {
    header(out, "vrs:engine_requests_routed_total");
    for (index, n) in routed {
        let _ = writeln!(
            out,
            "vrs:engine_requests_routed_total{{engine=\"{index}\"}} {n}"
        );
    }
}

fn engine_metrics(out: &mut String, engines: &[(u32, SchedulerStats)]) {
    for (name, value) in ENGINE {
        header(out, name);
        for (index, stats) in engines {
            let _ = writeln!(out, "{name}{{engine=\"{index}\"}} {}", value(stats));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_with_sum_and_count() {
        let m = Metrics::default();
        m.ttft.observe(Duration::from_micros(50));
        m.ttft.observe(Duration::from_millis(3));
        m.ttft.observe(Duration::from_secs(1000));
        m.request("/v1/completions", 200);
        m.request("/v1/completions", 200);
        m.request("/nope", 404);
        m.prompt_tokens(7);
        m.rejected(Rejection::QueueFullTokens);
        m.rejected(Rejection::QueueFullTokens);
        m.rejected(Rejection::QueueWaitTimeout);
        let stats = SchedulerStats {
            num_running: 2,
            prefix_cache_queries: 4,
            prefix_cache_hits: 1,
            ..SchedulerStats::default()
        };
        let text = m.render(&[(0, stats)], 3);
        for line in [
            "vrs:time_to_first_token_seconds_bucket{le=\"0.0001\"} 1",
            "vrs:time_to_first_token_seconds_bucket{le=\"0.0025\"} 1",
            "vrs:time_to_first_token_seconds_bucket{le=\"0.005\"} 2",
            "vrs:time_to_first_token_seconds_bucket{le=\"300\"} 2",
            "vrs:time_to_first_token_seconds_bucket{le=\"+Inf\"} 3",
            "vrs:time_to_first_token_seconds_count 3",
            "vrs:http_requests_total{endpoint=\"/v1/completions\",status=\"200\"} 2",
            "vrs:http_requests_total{endpoint=\"other\",status=\"404\"} 1",
            "vrs:prompt_tokens_total 7",
            "vrs:requests_in_flight 3",
            "vrs:requests_rejected_total{reason=\"max_concurrent_requests\"} 0",
            "vrs:requests_rejected_total{reason=\"queue_full_requests\"} 0",
            "vrs:requests_rejected_total{reason=\"queue_full_tokens\"} 2",
            "vrs:requests_rejected_total{reason=\"queue_wait_timeout\"} 1",
            "vrs:num_requests_running{engine=\"0\"} 2",
            "vrs:prefix_cache_hit_rate{engine=\"0\"} 0.25",
            "vrs:kv_cache_usage_perc{engine=\"0\"} 0.0",
            "# TYPE vrs:e2e_request_latency_seconds histogram",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn routed_counts_per_engine() {
        let mut text = String::new();
        routed_metrics(&mut text, &[(0, 5), (1, 7)]);
        assert!(text.contains("# TYPE vrs:engine_requests_routed_total counter\n"));
        assert!(text.contains("vrs:engine_requests_routed_total{engine=\"1\"} 7\n"));
    }
}
