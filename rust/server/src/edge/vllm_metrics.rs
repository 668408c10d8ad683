//! vLLM's metric names (`vllm:*`) on `GET /metrics`. Mirrors `server/edge/vllm_metrics.py`;
//! names, types, help texts, buckets and label names are `server/contracts/metrics.json`'s
//! ([`super::metric_contract`]). Per-request series are measured here in the frontend, per
//! engine the request was routed to; engine state comes from each engine's latest
//! `SchedulerStats`. Behaviour: docs/api.md, "vLLM's names".

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{LazyLock, Mutex};

use vrs_wire::SchedulerStats;

use super::metric_contract::{buckets, family, header, Buckets};
use engine::ENGINE;

mod engine;

/// The finish reasons vLLM pre-creates for `vllm:request_success`.
const REASONS: &[&str] = &["stop", "length", "abort"];

/// Which histogram: an index into [`HISTOGRAMS`].
#[derive(Clone, Copy)]
enum H {
    Ttft = 0,
    Itl,
    E2e,
    Queue,
    Inference,
    Prefill,
    Decode,
    PromptLen,
    GenerationLen,
    MaxGeneration,
}

/// The histograms, in [`H`]'s order (vLLM's own, `vllm/v1/metrics/loggers.py`).
const HISTOGRAMS: [&str; 10] = [
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:request_max_num_generation_tokens",
];

/// Each histogram's buckets (from the contract), in [`H`]'s order.
static BUCKETS: LazyLock<Vec<Buckets>> =
    LazyLock::new(|| HISTOGRAMS.iter().map(|name| buckets(name)).collect());

/// One histogram's counts (per bucket, not cumulative), sum and count.
#[derive(Clone)]
struct Counts {
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Everything measured for the requests routed to one engine.
#[derive(Clone)]
struct PerEngine {
    prompt_tokens: u64,
    generation_tokens: u64,
    success: BTreeMap<&'static str, u64>,
    histograms: Vec<Counts>,
}

impl Default for PerEngine {
    fn default() -> Self {
        Self {
            prompt_tokens: 0,
            generation_tokens: 0,
            success: REASONS.iter().map(|r| (*r, 0)).collect(),
            histograms: BUCKETS
                .iter()
                .map(|b| Counts {
                    buckets: vec![0; b.bounds.len()],
                    sum: 0.0,
                    count: 0,
                })
                .collect(),
        }
    }
}

impl PerEngine {
    fn observe(&mut self, which: H, value: f64) {
        let bounds = &BUCKETS[which as usize].bounds;
        let counts = &mut self.histograms[which as usize];
        if let Some(i) = bounds.iter().position(|&b| value <= b) {
            counts.buckets[i] += 1;
        }
        counts.sum += value;
        counts.count += 1;
    }
}

/// One finished engine request, as `vllm:request_success` and the per-request
/// histograms see it.
pub struct Finished {
    pub reason: &'static str,
    pub e2e: f64,
    /// First token to last token; `None` when no token came.
    pub decode: Option<f64>,
    /// The engine's prefill time, when it reported one.
    pub prefill: Option<f64>,
    pub prompt_tokens: u32,
    pub generation_tokens: u32,
}

/// The `vllm:*` series measured in the frontend, per engine index.
#[derive(Default)]
pub struct VllmMetrics {
    engines: Mutex<BTreeMap<u32, PerEngine>>,
}

impl VllmMetrics {
    fn with(&self, engine: u32, f: impl FnOnce(&mut PerEngine)) {
        if let Ok(mut engines) = self.engines.lock() {
            f(engines.entry(engine).or_default());
        }
    }

    /// The engine's first output for a request: its prompt was processed.
    pub fn first_token(&self, engine: u32, prompt_tokens: u32, ttft: f64) {
        self.with(engine, |e| {
            e.prompt_tokens += u64::from(prompt_tokens);
            e.observe(H::Ttft, ttft);
        });
    }

    /// `tokens` generated; `since_last`: seconds since the request's previous output.
    pub fn generated(&self, engine: u32, tokens: u32, since_last: Option<f64>) {
        self.with(engine, |e| {
            e.generation_tokens += u64::from(tokens);
            if let Some(itl) = since_last {
                e.observe(H::Itl, itl);
            }
        });
    }

    pub fn finished(&self, engine: u32, request: &Finished) {
        self.with(engine, |e| {
            *e.success.entry(request.reason).or_default() += 1;
            e.observe(H::E2e, request.e2e);
            if let Some(decode) = request.decode {
                e.observe(H::Decode, decode);
            }
            if let Some(prefill) = request.prefill {
                e.observe(H::Inference, prefill + request.decode.unwrap_or(0.0));
            }
            e.observe(H::PromptLen, f64::from(request.prompt_tokens));
            e.observe(H::GenerationLen, f64::from(request.generation_tokens));
        });
    }

    /// The engine's queue time of a request (seconds from its arrival at the engine to
    /// its first scheduling).
    pub fn queue(&self, engine: u32, seconds: f64) {
        self.with(engine, |e| e.observe(H::Queue, seconds));
    }

    /// The engine's prefill time of a request (seconds from its first scheduling to its
    /// first token).
    pub fn prefill(&self, engine: u32, seconds: f64) {
        self.with(engine, |e| e.observe(H::Prefill, seconds));
    }

    /// The most tokens any of an HTTP request's `n` choices generated.
    pub fn max_generation(&self, engine: u32, tokens: u32) {
        self.with(engine, |e| e.observe(H::MaxGeneration, f64::from(tokens)));
    }

    /// Appends every `vllm:*` series, one label set per engine (those with stats and
    /// those that served requests).
    pub fn render(
        &self,
        out: &mut String,
        model_name: &str,
        max_model_len: u64,
        stats: &[(u32, SchedulerStats)],
    ) {
        let mut measured = self.engines.lock().map(|e| e.clone()).unwrap_or_default();
        for (index, _) in stats {
            measured.entry(*index).or_default();
        }
        let model = escape(model_name);
        let labels = |index: &u32| format!("model_name=\"{model}\",engine=\"{index}\"");
        for (name, value) in ENGINE {
            header(out, name);
            let sample = if family(name).is_some_and(|f| f.kind == "counter") {
                format!("{name}_total")
            } else {
                (*name).to_string()
            };
            for (index, s) in stats {
                let _ = writeln!(out, "{sample}{{{}}} {}", labels(index), value(s));
            }
        }
        let counters: [(&str, Count); 2] = [
            ("vllm:prompt_tokens", |e| e.prompt_tokens),
            ("vllm:generation_tokens", |e| e.generation_tokens),
        ];
        for (name, value) in counters {
            header(out, name);
            for (index, e) in &measured {
                let _ = writeln!(out, "{name}_total{{{}}} {}", labels(index), value(e));
            }
        }
        let name = "vllm:request_success";
        header(out, name);
        for (index, e) in &measured {
            for (reason, n) in &e.success {
                let _ = writeln!(
                    out,
                    "{name}_total{{{},finished_reason=\"{reason}\"}} {n}",
                    labels(index)
                );
            }
        }
        for (i, (name, b)) in HISTOGRAMS.iter().zip(BUCKETS.iter()).enumerate() {
            header(out, name);
            let capped = family(name).is_some_and(|f| f.capped_at_max_model_len);
            for (index, e) in &measured {
                let c = &e.histograms[i];
                let mut running = 0;
                for ((bound, le), n) in b.bounds.iter().zip(b.labels).zip(&c.buckets) {
                    running += n;
                    if capped && *bound > max_model_len as f64 {
                        break;
                    }
                    let _ = writeln!(
                        out,
                        "{name}_bucket{{{},le=\"{le}\"}} {running}",
                        labels(index)
                    );
                }
                let l = labels(index);
                let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {}", c.count);
                let _ = writeln!(out, "{name}_sum{{{l}}} {}", float(c.sum));
                let _ = writeln!(out, "{name}_count{{{l}}} {}", c.count);
            }
        }
    }
}

type Count = fn(&PerEngine) -> u64;

/// The `n` choices of one HTTP request: the last to finish observes the most tokens
/// any of them generated (`vllm:request_max_num_generation_tokens`).
pub struct Siblings {
    remaining: AtomicU32,
    max: AtomicU32,
}

impl Siblings {
    pub fn new(n: u32) -> Self {
        Self {
            remaining: AtomicU32::new(n),
            max: AtomicU32::new(0),
        }
    }

    /// One choice ended with `tokens` generated; the most of all once the last ended.
    pub fn done(&self, tokens: u32) -> Option<u32> {
        self.max.fetch_max(tokens, Ordering::SeqCst);
        (self.remaining.fetch_sub(1, Ordering::SeqCst) == 1)
            .then(|| self.max.load(Ordering::SeqCst))
    }
}

/// A float as Python's `repr` prints it for ordinary values (`0.0`, `1.5`).
pub(crate) fn float(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e16 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// A label value in the text format: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests;
