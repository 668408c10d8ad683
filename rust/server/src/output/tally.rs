//! One generation's bookkeeping: its token counts (for `usage`, with the prompt tokens
//! the engine found in its prefix cache), the engine's queue and prefill times, and the
//! times of its first, latest and last output, reported to its [`Observer`] (latency
//! histograms, `vllm:*` series, trace) as they come and, once it is over, by
//! [`Tally::report`].

use std::time::Instant;

use vrs_wire::{EngineCoreOutput, FinishReason};

use crate::edge::vllm_metrics::Finished;
use crate::openai::Usage;
use crate::output::observer::Observer;

/// A generation's counts and times.
pub struct Tally {
    pub(super) observer: Observer,
    pub(super) prompt_tokens: u32,
    pub(super) completion_tokens: u32,
    /// The prompt tokens the engine found in its prefix cache (with the first output).
    cached_tokens: u32,
    /// When the first and the latest output with tokens came.
    first: Option<Instant>,
    last: Option<Instant>,
    /// When the request finished (its end-to-end latency).
    ended: Option<Instant>,
    /// The engine it was routed to (the `engine` label of the `vllm:*` series).
    engine: u32,
    /// The engine's prefill time (seconds), once reported.
    prefill: Option<f64>,
}

impl Tally {
    /// The tally of a request of `prompt_tokens` tokens routed to engine `engine`.
    pub fn new(observer: Observer, engine: u32, prompt_tokens: usize) -> Self {
        Self {
            observer,
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            completion_tokens: 0,
            cached_tokens: 0,
            first: None,
            last: None,
            ended: None,
            engine,
            prefill: None,
        }
    }

    pub fn usage(&self) -> Usage {
        Usage::new(self.prompt_tokens, self.completion_tokens).with_cached(self.cached_tokens)
    }

    /// The engine's prefix-cache hit, queue and prefill times (with a request's first
    /// output); the trace's cached tokens and engine times.
    pub fn timings(&mut self, output: &EngineCoreOutput) {
        if let Some((trace, prompt)) = &self.observer.trace {
            trace.output(*prompt, output);
        }
        let cached = u32::try_from(output.num_cached_tokens).unwrap_or(u32::MAX);
        self.cached_tokens = self.cached_tokens.max(cached.min(self.prompt_tokens));
        let vllm = &self.observer.metrics.vllm;
        if let Some(queue) = output.queue_time {
            vllm.queue(self.engine, queue);
        }
        if let Some(prefill) = output.prefill_time {
            self.prefill = Some(prefill);
            vllm.prefill(self.engine, prefill);
        }
    }

    /// The request finished: its end-to-end latency.
    pub fn end(&mut self) {
        let now = Instant::now();
        self.ended = Some(now);
        self.observer
            .metrics
            .e2e
            .observe(now - self.observer.arrival);
    }

    /// Counts generated tokens and their latencies; they are completion tokens unless
    /// `dropped` (an echo-only request's).
    pub fn count(&mut self, tokens: usize, dropped: bool) {
        if tokens == 0 {
            return;
        }
        let now = Instant::now();
        let metrics = &self.observer.metrics;
        let since_last = match self.last {
            None => {
                let ttft = now - self.observer.arrival;
                metrics.ttft.observe(ttft);
                metrics
                    .vllm
                    .first_token(self.engine, self.prompt_tokens, ttft.as_secs_f64());
                self.first = Some(now);
                if let Some((trace, _)) = &self.observer.trace {
                    trace.first_token();
                }
                None
            }
            Some(last) => {
                metrics.itl.observe(now - last);
                Some((now - last).as_secs_f64())
            }
        };
        self.last = Some(now);
        let tokens = u32::try_from(tokens).unwrap_or(u32::MAX);
        if !dropped {
            self.completion_tokens = self.completion_tokens.saturating_add(tokens);
        }
        metrics.generation_tokens(tokens as usize);
        metrics.vllm.generated(self.engine, tokens, since_last);
    }

    /// The `vllm:*` per-request series once it is over, `outcome` its finish reason
    /// (`"error"` when it failed, `None` when it never finished): a finished request by
    /// its reason (`abort` when the client went away or the deadline passed); a failed
    /// one only as one of its siblings.
    pub fn report(&self, outcome: Option<&'static str>) {
        let vllm = &self.observer.metrics.vllm;
        let reason = match outcome {
            Some("error") => None,
            Some(reason) => Some(reason),
            None => Some(FinishReason::Abort.as_str()),
        };
        if let Some(reason) = reason {
            let ended = self.ended.unwrap_or_else(Instant::now);
            vllm.finished(
                self.engine,
                &Finished {
                    reason,
                    e2e: (ended - self.observer.arrival).as_secs_f64(),
                    decode: self
                        .first
                        .zip(self.last)
                        .map(|(f, l)| (l - f).as_secs_f64()),
                    prefill: self.prefill,
                    prompt_tokens: self.prompt_tokens,
                    generation_tokens: self.completion_tokens,
                },
            );
        }
        if let Some(max) = self.observer.siblings.done(self.completion_tokens) {
            vllm.max_generation(self.engine, max);
        }
        if let Some((trace, _)) = &self.observer.trace {
            let reason = outcome.unwrap_or(FinishReason::Abort.as_str());
            trace.finished(reason, self.completion_tokens);
        }
    }
}
