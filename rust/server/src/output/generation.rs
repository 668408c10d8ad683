//! One request's output pipeline: engine outputs → incremental detokenizer → stop strings →
//! text pieces, with the token counts for `usage` and the request's times kept by its
//! [`Tally`]. An engine failure or a `--max-queue-wait` timeout ([`crate::edge::queue`]) ends
//! it with an error; with [`Generation::token_offsets`] each piece says where each of its
//! tokens' text begins (for counting reasoning tokens), with [`Generation::token_ids`] the
//! ids of the tokens it counts (`return_token_ids`). Mirrors `server/output/generation.py`.

use std::time::Instant;

use vrs_text::{IncrementalDetokenizer, StopMatcher, TextError, Tokenizer};
use vrs_wire::{EngineCoreOutput, FinishReason};

use crate::edge::error::text_error;
use crate::edge::error::ApiError;
use crate::edge::metrics::Rejection;
use crate::edge::queue::Ticket;
use crate::openai::Usage;
use crate::output::observer::Observer;
pub use crate::output::piece::Piece;
use crate::output::tally::Tally;
use vrs_engine_client::client::{EngineEvent, RequestHandle};

/// A running request as the HTTP layer sees it.
pub struct Generation {
    handle: RequestHandle,
    detokenizer: IncrementalDetokenizer,
    stop: Option<StopMatcher>,
    outcome: Option<&'static str>,
    /// A failure that follows text not yet handed out.
    pending: Option<ApiError>,
    /// Its token counts and times, reported to its observer.
    tally: Tally,
    /// `max_tokens` 0 with `echo`: the generated token is dropped.
    echo_only: bool,
    /// The field of the request's structured-output constraint (the `param` of a 400
    /// when the engine refuses it).
    constraint: Option<&'static str>,
    /// Its place in the queue until its first output.
    ticket: Option<Ticket>,
    /// Whether pieces carry their tokens' offsets, and the bytes of text so far.
    offsets: bool,
    text_len: usize,
    /// Whether pieces carry their token ids.
    ids: bool,
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
            outcome: None,
            pending: None,
            tally: Tally::new(observer, engine, prompt_tokens),
            echo_only: false,
            constraint: None,
            ticket: None,
            offsets: false,
            text_len: 0,
            ids: false,
        })
    }

    /// Pieces carry [`Piece::token_offsets`] (the text is then detokenized token by
    /// token).
    pub fn token_offsets(mut self, offsets: bool) -> Self {
        self.offsets = offsets;
        self
    }

    /// Pieces carry [`Piece::token_ids`].
    pub fn token_ids(mut self, ids: bool) -> Self {
        self.ids = ids;
        self
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
                    self.tally
                        .observer
                        .metrics
                        .rejected(Rejection::QueueWaitTimeout);
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
        self.tally.usage()
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
        self.tally.timings(&output);
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
        let placed_before = piece.token_offsets.len();
        if let Some(stop) = &mut self.stop {
            // Token by token, so that a stop string ends the count at the token that
            // completes it, however many tokens the engine's output carried.
            for (i, id) in ids.iter().enumerate() {
                let text = self
                    .detokenizer
                    .push(std::slice::from_ref(id))
                    .map_err(text_error)?;
                if self.offsets {
                    piece.token_offsets.push(self.text_len);
                }
                self.text_len += text.len();
                let outcome = stop.push(&text);
                piece.text.push_str(&outcome.emit);
                if let Some(matched) = outcome.stopped {
                    piece.stop_sequence = Some(matched);
                    piece.logprobs.truncate(shown_before + i + 1);
                    self.take_ids(piece, &output.new_token_ids, i + 1);
                    return Ok(Some(self.stopped_at(started, piece, placed_before, i + 1)));
                }
            }
            if finish.is_some() {
                self.handle.finished();
                let text = self.detokenizer.finish().map_err(text_error)?;
                self.text_len += text.len();
                let outcome = stop.push(&text);
                piece.text.push_str(&outcome.emit);
                if let Some(matched) = outcome.stopped {
                    piece.stop_sequence = Some(matched);
                    let tokens = output.new_token_ids.len();
                    self.take_ids(piece, &output.new_token_ids, tokens);
                    return Ok(Some(self.stopped_at(started, piece, placed_before, tokens)));
                }
                piece.text.push_str(&stop.flush());
            }
        } else if self.offsets {
            for id in ids {
                let text = self
                    .detokenizer
                    .push(std::slice::from_ref(id))
                    .map_err(text_error)?;
                piece.token_offsets.push(self.text_len);
                self.text_len += text.len();
                piece.text.push_str(&text);
            }
            if finish.is_some() {
                self.handle.finished();
                let text = self.detokenizer.finish().map_err(text_error)?;
                self.text_len += text.len();
                piece.text.push_str(&text);
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
        self.tally
            .observer
            .metrics
            .detokenize
            .observe(started.elapsed());
        self.place_rest(piece, placed_before, output.new_token_ids.len());
        self.take_ids(piece, &output.new_token_ids, output.new_token_ids.len());
        self.tally.count(output.new_token_ids.len(), self.echo_only);
        if finish.is_some() {
            self.tally.end();
        }
        match finish {
            None => Ok(None),
            Some(FinishReason::Error) => Err(self.engine_error(&output)),
            Some(reason) => Ok(Some(reason.as_str())),
        }
    }

    /// With token ids, the first `tokens` of the output's `ids` (those it counts) into
    /// `piece`.
    fn take_ids(&self, piece: &mut Piece, ids: &[u32], tokens: usize) {
        if self.ids {
            piece
                .token_ids
                .extend_from_slice(&ids[..tokens.min(ids.len())]);
        }
    }

    /// With offsets, the tokens of this output (`tokens` counted from `placed_before`)
    /// that have none yet (the stop token) are placed at the text's end.
    fn place_rest(&self, piece: &mut Piece, placed_before: usize, tokens: usize) {
        if self.offsets {
            let placed = piece.token_offsets.len() - placed_before;
            let end = self.text_len;
            piece
                .token_offsets
                .extend(std::iter::repeat(end).take(tokens.saturating_sub(placed)));
        }
    }

    /// The end of a generation at our own stop string, completed by the `tokens`-th token
    /// of the output whose detokenizing began at `started` (its offsets from
    /// `placed_before` in `piece`): the engine may still be generating.
    fn stopped_at(
        &mut self,
        started: Instant,
        piece: &mut Piece,
        placed_before: usize,
        tokens: usize,
    ) -> &'static str {
        self.place_rest(piece, placed_before, tokens);
        self.tally
            .observer
            .metrics
            .detokenize
            .observe(started.elapsed());
        self.tally.count(tokens, self.echo_only);
        self.handle.abort();
        self.tally.end();
        FinishReason::Stop.as_str()
    }

    /// An echo-only request's output: counted for the metrics, its token dropped; it
    /// ends with `length` (the one token was only there to prefill the prompt).
    fn echo_only_output(
        &mut self,
        output: &EngineCoreOutput,
        finish: Option<FinishReason>,
    ) -> Result<Option<&'static str>, ApiError> {
        self.tally.count(output.new_token_ids.len(), self.echo_only);
        if finish.is_some() {
            self.handle.finished();
            self.tally.end();
        }
        match finish {
            None => Ok(None),
            Some(FinishReason::Error) => Err(self.engine_error(output)),
            Some(_) => Ok(Some(FinishReason::Length.as_str())),
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
        self.tally.report(self.outcome);
        let id = self.handle.request_id();
        let elapsed_ms = self.tally.observer.arrival.elapsed().as_millis() as u64;
        match self.outcome {
            Some(reason) => tracing::info!(
                request_id = %id,
                prompt_tokens = self.tally.prompt_tokens,
                completion_tokens = self.tally.completion_tokens,
                elapsed_ms,
                "finished: {reason}"
            ),
            None => tracing::info!(
                request_id = %id,
                completion_tokens = self.tally.completion_tokens,
                elapsed_ms,
                "client went away; aborting"
            ),
        }
    }
}

#[cfg(test)]
mod tests;
