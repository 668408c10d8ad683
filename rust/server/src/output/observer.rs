//! Where the latencies of one HTTP request's generations go: its metrics, its arrival,
//! its `n` choices and its trace (see [`crate::output::tally`], which reports to it).

use std::sync::Arc;
use std::time::Instant;

use crate::edge::metrics::Metrics;
use crate::edge::trace::RequestTrace;
use crate::edge::vllm_metrics::Siblings;

/// Where a request's latencies go: the metrics, when the HTTP request arrived, its `n`
/// choices (for `vllm:request_max_num_generation_tokens`), and its trace with the index
/// of the prompt (when traces are on).
#[derive(Clone)]
pub struct Observer {
    pub metrics: Arc<Metrics>,
    pub arrival: Instant,
    pub(super) siblings: Arc<Siblings>,
    pub(super) trace: Option<(Arc<RequestTrace>, usize)>,
}

impl Observer {
    /// The observer of the `n` choices of one HTTP request.
    pub fn new(metrics: Arc<Metrics>, arrival: Instant, n: u32) -> Self {
        Self {
            metrics,
            arrival,
            siblings: Arc::new(Siblings::new(n)),
            trace: None,
        }
    }

    /// Its choices report to `trace` (if any) as those of prompt `prompt`.
    pub fn traced(mut self, trace: Option<Arc<RequestTrace>>, prompt: usize) -> Self {
        self.trace = trace.map(|t| (t, prompt));
        self
    }
}
