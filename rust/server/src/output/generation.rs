//! One request's output pipeline: engine outputs → incremental detokenizer → stop
//! strings → text pieces, with the token counts for `usage` (the prompt's cached tokens
//! as the engine reports them with its first output); the prompt's logprobs
//! (with the first output) ride on the first piece. An echo-only request (`max_tokens`
//! 0 with `echo`) drops its one generated token: no text, no completion tokens, and
//! finish reason `length`. An engine failure is a 500, except when the engine refused
//! the request's structured-output spec (`error_kind` `invalid_request`): a 400 naming
//! the constraint's field, the engine's message verbatim. A queued request (see
//! [`crate::edge::queue`]) leaves the queue at its first output; still queued at its
//! `--max-queue-wait` deadline, it is aborted in the engine and fails with a 503.

use std::sync::Arc;
use std::time::Instant;

use vrs_text::{IncrementalDetokenizer, StopMatcher, TextError, Tokenizer};
use vrs_wire::{EngineCoreOutput, FinishReason, TokenLogprobs};

use crate::edge::error::text_error;
use crate::edge::error::ApiError;
use crate::edge::metrics::{Metrics, Rejection};
use crate::edge::queue::Ticket;
use crate::edge::trace::RequestTrace;
use crate::edge::vllm_metrics::{Finished, Siblings};
use crate::openai::Usage;
use vrs_engine_client::client::{EngineEvent, RequestHandle};

/// What the client gets next: text (never empty unless this is the last piece or the
/// first with the prompt's logprobs), the finish reason on the last, the logprobs of the
/// piece's visible tokens, and (first piece) the engine's prompt logprobs.
#[derive(Debug, Default, PartialEq)]
pub struct Piece {
    pub text: String,
    pub finish: Option<&'static str>,
    pub logprobs: Vec<TokenLogprobs>,
    pub prompt_logprobs: Option<Vec<TokenLogprobs>>,
    /// The stop string that ended the generation (on the last piece only).
    pub stop_sequence: Option<String>,
}

impl Piece {
    fn is_empty(&self) -> bool {
        self.text.is_empty() && self.logprobs.is_empty() && self.prompt_logprobs.is_none()
    }
}

/// Where a request's latencies go: the metrics, when the HTTP request arrived, its `n`
/// choices (for `vllm:request_max_num_generation_tokens`), and its trace with the index
/// of the prompt (when traces are on).
#[derive(Clone)]
pub struct Observer {
    pub metrics: Arc<Metrics>,
    pub arrival: Instant,
    siblings: Arc<Siblings>,
    trace: Option<(Arc<RequestTrace>, usize)>,
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

/// A running request as the HTTP layer sees it.
pub struct Generation {
    handle: RequestHandle,
    detokenizer: IncrementalDetokenizer,
    stop: Option<StopMatcher>,
    prompt_tokens: u32,
    completion_tokens: u32,
    /// The prompt tokens the engine found in its prefix cache (with the first output).
    cached_tokens: u32,
    outcome: Option<&'static str>,
    /// A failure that follows text not yet handed out.
    pending: Option<ApiError>,
    observer: Observer,
    /// When the first and the latest output with tokens came.
    first: Option<Instant>,
    last: Option<Instant>,
    /// When the request finished (its end-to-end latency).
    ended: Option<Instant>,
    /// The engine it was routed to (the `engine` label of the `vllm:*` series).
    engine: u32,
    /// The engine's prefill time (seconds), once reported.
    prefill: Option<f64>,
    /// `max_tokens` 0 with `echo`: the generated token is dropped.
    echo_only: bool,
    /// The field of the request's structured-output constraint (the `param` of a 400
    /// when the engine refuses it).
    constraint: Option<&'static str>,
    /// Its place in the queue until its first output.
    ticket: Option<Ticket>,
}

impl Generation {
    pub fn new(
        handle: RequestHandle,
        tokenizer: &Tokenizer,
        prompt_tail: &[u32],
        skip_special_tokens: bool,
        stop: &[String],
        prompt_tokens: usize,
        observer: Observer,
    ) -> Result<Self, TextError> {
        let detokenizer =
            IncrementalDetokenizer::new(tokenizer.clone(), prompt_tail, skip_special_tokens)?;
        let stop = (!stop.is_empty()).then(|| StopMatcher::new(stop.iter().cloned()));
        let engine = handle.engine_index();
        Ok(Self {
            handle,
            detokenizer,
            stop,
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            completion_tokens: 0,
            cached_tokens: 0,
            outcome: None,
            pending: None,
            observer,
            first: None,
            last: None,
            ended: None,
            engine,
            prefill: None,
            echo_only: false,
            constraint: None,
            ticket: None,
        })
    }

    /// Drops the generated text and tokens when `echo_only` (see the module doc).
    pub fn echo_only(mut self, echo_only: bool) -> Self {
        self.echo_only = echo_only;
        self
    }

    /// Names the request's structured-output constraint (see the module doc).
    pub fn constraint(mut self, constraint: Option<&'static str>) -> Self {
        self.constraint = constraint;
        self
    }

    /// Holds `ticket` (its place in the queue) until the first output.
    pub fn queued(mut self, ticket: Option<Ticket>) -> Self {
        self.ticket = ticket;
        self
    }

    /// The next engine event; `None` once the queue is closed. While the request is
    /// queued this waits until its deadline at most: past it, the engine request is
    /// aborted and the error is the queue's 503.
    async fn recv(&mut self) -> Result<Option<EngineEvent>, ApiError> {
        let Some(ticket) = &self.ticket else {
            return Ok(self.handle.recv().await);
        };
        let event = match ticket.deadline() {
            None => self.handle.recv().await,
            Some(at) => match tokio::time::timeout_at(at, self.handle.recv()).await {
                Ok(event) => event,
                Err(_) => {
                    let err = ticket.timeout_error();
                    self.ticket = None;
                    self.handle.abort();
                    self.observer.metrics.rejected(Rejection::QueueWaitTimeout);
                    return Err(err);
                }
            },
        };
        self.ticket = None;
        Ok(event)
    }

    /// The error of an output that ended with `error`.
    fn engine_error(&self, output: &EngineCoreOutput) -> ApiError {
        let message = output
            .error_message
            .clone()
            .unwrap_or_else(|| "the engine failed this request".into());
        match self.constraint {
            Some(field) if output.is_invalid_request() => ApiError::bad(field, message),
            _ => ApiError::EngineError(message),
        }
    }

    pub fn usage(&self) -> Usage {
        Usage::new(self.prompt_tokens, self.completion_tokens).with_cached(self.cached_tokens)
    }

    /// The next piece; `None` after the last (or after a failure). Outputs already
    /// queued are merged into one piece, so a slow client gets fewer, larger events
    /// instead of a growing backlog.
    pub async fn next(&mut self) -> Option<Result<Piece, ApiError>> {
        if let Some(err) = self.pending.take() {
            return Some(Err(self.fail(err)));
        }
        if self.outcome.is_some() {
            return None;
        }
        let mut piece = Piece::default();
        loop {
            let event = match self.recv().await {
                Ok(Some(event)) => event,
                Ok(None) => {
                    let err = ApiError::from(self.handle.closed_error());
                    return Some(Err(self.fail(err)));
                }
                Err(err) => return Some(Err(self.fail(err))),
            };
            let mut event = Some(event);
            while let Some(ev) = event.take() {
                match self.absorb(ev, &mut piece) {
                    Ok(None) => event = self.handle.try_recv(),
                    Ok(Some(reason)) => {
                        self.outcome = Some(reason);
                        piece.finish = Some(reason);
                        return Some(Ok(piece));
                    }
                    Err(err) if piece.is_empty() => return Some(Err(self.fail(err))),
                    Err(err) => {
                        self.pending = Some(err);
                        return Some(Ok(piece));
                    }
                }
            }
            if !piece.is_empty() {
                return Some(Ok(piece));
            }
        }
    }

    fn fail(&mut self, err: ApiError) -> ApiError {
        self.outcome = Some("error");
        tracing::warn!(request_id = %self.handle.request_id(), "request failed: {err}");
        err
    }

    /// Adds one event's text to `piece`; returns the finish reason when it ended.
    fn absorb(
        &mut self,
        event: EngineEvent,
        piece: &mut Piece,
    ) -> Result<Option<&'static str>, ApiError> {
        let mut output = match event {
            EngineEvent::Output(output) => output,
            EngineEvent::Dead(reason) => {
                self.handle.finished();
                return Err(ApiError::EngineDead(reason.to_string()));
            }
        };
        let finish = output
            .finish()
            .map_err(|e| ApiError::Internal(format!("bad engine output: {e}")))?;
        self.timings(&output);
        if let Some(prompt) = output.prompt_logprobs.take() {
            piece.prompt_logprobs = Some(prompt);
        }
        if self.echo_only {
            return self.echo_only_output(&output, finish);
        }
        let ids = visible_ids(&output);
        let shown_before = piece.logprobs.len();
        if let Some(logprobs) = &output.new_logprobs {
            piece
                .logprobs
                .extend(logprobs.iter().take(ids.len()).cloned());
        }
        let started = Instant::now();
        if let Some(stop) = &mut self.stop {
            // Token by token, so that a stop string ends the count at the token that
            // completes it, however many tokens the engine's output carried.
            for (i, id) in ids.iter().enumerate() {
                let text = self
                    .detokenizer
                    .push(std::slice::from_ref(id))
                    .map_err(text_error)?;
                let outcome = stop.push(&text);
                piece.text.push_str(&outcome.emit);
                if let Some(matched) = outcome.stopped {
                    piece.stop_sequence = Some(matched);
                    piece.logprobs.truncate(shown_before + i + 1);
                    return Ok(Some(self.stopped_at(started, i + 1)));
                }
            }
            if finish.is_some() {
                self.handle.finished();
                let text = self.detokenizer.finish().map_err(text_error)?;
                let outcome = stop.push(&text);
                piece.text.push_str(&outcome.emit);
                if let Some(matched) = outcome.stopped {
                    piece.stop_sequence = Some(matched);
                    return Ok(Some(self.stopped_at(started, output.new_token_ids.len())));
                }
                piece.text.push_str(&stop.flush());
            }
        } else {
            piece
                .text
                .push_str(&self.detokenizer.push(ids).map_err(text_error)?);
            if finish.is_some() {
                self.handle.finished();
                piece
                    .text
                    .push_str(&self.detokenizer.finish().map_err(text_error)?);
            }
        }
        self.observer.metrics.detokenize.observe(started.elapsed());
        self.count(output.new_token_ids.len());
        if finish.is_some() {
            self.end();
        }
        match finish {
            None => Ok(None),
            Some(FinishReason::Error) => Err(self.engine_error(&output)),
            Some(reason) => Ok(Some(reason.as_str())),
        }
    }

    /// The end of a generation at our own stop string, completed by the `tokens`-th token
    /// of the output whose detokenizing began at `started`: the engine may still be
    /// generating.
    fn stopped_at(&mut self, started: Instant, tokens: usize) -> &'static str {
        self.observer.metrics.detokenize.observe(started.elapsed());
        self.count(tokens);
        self.handle.abort();
        self.end();
        FinishReason::Stop.as_str()
    }

    /// The engine's prefix-cache hit, queue and prefill times (with a request's first
    /// output); the trace's cached tokens and engine times.
    fn timings(&mut self, output: &EngineCoreOutput) {
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

    /// An echo-only request's output: counted for the metrics, its token dropped; it
    /// ends with `length` (the one token was only there to prefill the prompt).
    fn echo_only_output(
        &mut self,
        output: &EngineCoreOutput,
        finish: Option<FinishReason>,
    ) -> Result<Option<&'static str>, ApiError> {
        self.count(output.new_token_ids.len());
        if finish.is_some() {
            self.handle.finished();
            self.end();
        }
        match finish {
            None => Ok(None),
            Some(FinishReason::Error) => Err(self.engine_error(output)),
            Some(_) => Ok(Some(FinishReason::Length.as_str())),
        }
    }

    /// The request finished: its end-to-end latency.
    fn end(&mut self) {
        let now = Instant::now();
        self.ended = Some(now);
        self.observer
            .metrics
            .e2e
            .observe(now - self.observer.arrival);
    }

    /// Counts generated tokens and their latencies.
    fn count(&mut self, tokens: usize) {
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
        if !self.echo_only {
            self.completion_tokens = self.completion_tokens.saturating_add(tokens);
        }
        metrics.generation_tokens(tokens as usize);
        metrics.vllm.generated(self.engine, tokens, since_last);
    }

    /// The `vllm:*` per-request series once it is over: a finished request by its
    /// reason (`abort` when the client went away or the deadline passed); a failed
    /// one only as one of its siblings.
    fn report(&self) {
        let vllm = &self.observer.metrics.vllm;
        let reason = match self.outcome {
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
            let reason = self.outcome.unwrap_or(FinishReason::Abort.as_str());
            trace.finished(reason, self.completion_tokens);
        }
    }
}

/// The new tokens whose text the client sees: a stop token ends the output unseen.
fn visible_ids(output: &EngineCoreOutput) -> &[u32] {
    match (output.stop_token_id, output.new_token_ids.split_last()) {
        (Some(stop), Some((&last, rest))) if last == stop => rest,
        _ => &output.new_token_ids,
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        self.report();
        let id = self.handle.request_id();
        let elapsed_ms = self.observer.arrival.elapsed().as_millis() as u64;
        match self.outcome {
            Some(reason) => tracing::info!(
                request_id = %id,
                prompt_tokens = self.prompt_tokens,
                completion_tokens = self.completion_tokens,
                elapsed_ms,
                "finished: {reason}"
            ),
            None => tracing::info!(
                request_id = %id,
                completion_tokens = self.completion_tokens,
                elapsed_ms,
                "client went away; aborting"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
