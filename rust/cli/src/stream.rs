//! One request's output pipeline: engine outputs → incremental detokenizer → stop
//! strings → text pieces, with the token counts for `usage`.

use std::time::Instant;

use vrs_text::{IncrementalDetokenizer, StopMatcher, TextError, Tokenizer};
use vrs_wire::{EngineCoreOutput, FinishReason};

use crate::chat::text_error;
use crate::engine_client::{EngineEvent, RequestHandle};
use crate::error::ApiError;
use crate::openai::Usage;

/// What the client gets next.
#[derive(Debug, PartialEq)]
pub enum Piece {
    /// More text (never empty).
    Text(String),
    /// The last text (maybe empty) and the OpenAI finish reason.
    Finished { text: String, reason: &'static str },
    /// The request failed; nothing follows.
    Failed(ApiError),
}

/// A running request as the HTTP layer sees it.
pub struct Generation {
    handle: RequestHandle,
    detokenizer: IncrementalDetokenizer,
    stop: Option<StopMatcher>,
    prompt_tokens: u32,
    completion_tokens: u32,
    outcome: Option<&'static str>,
    /// A failure that follows text not yet handed out.
    pending: Option<ApiError>,
    started: Instant,
}

impl Generation {
    pub fn new(
        handle: RequestHandle,
        tokenizer: &Tokenizer,
        prompt_tail: &[u32],
        skip_special_tokens: bool,
        stop: &[String],
        prompt_tokens: usize,
    ) -> Result<Self, TextError> {
        let detokenizer =
            IncrementalDetokenizer::new(tokenizer.clone(), prompt_tail, skip_special_tokens)?;
        let stop = (!stop.is_empty()).then(|| StopMatcher::new(stop.iter().cloned()));
        Ok(Self {
            handle,
            detokenizer,
            stop,
            prompt_tokens: u32::try_from(prompt_tokens).unwrap_or(u32::MAX),
            completion_tokens: 0,
            outcome: None,
            pending: None,
            started: Instant::now(),
        })
    }

    pub fn usage(&self) -> Usage {
        Usage::new(self.prompt_tokens, self.completion_tokens)
    }

    /// The next piece; `None` after the last. Outputs already queued are merged into one
    /// piece, so a slow client gets fewer, larger events instead of a growing backlog.
    pub async fn next(&mut self) -> Option<Piece> {
        if let Some(err) = self.pending.take() {
            return Some(self.fail(err));
        }
        if self.outcome.is_some() {
            return None;
        }
        let mut text = String::new();
        loop {
            let Some(event) = self.handle.rx.recv().await else {
                return Some(
                    self.fail(ApiError::EngineDead("the engine connection closed".into())),
                );
            };
            let mut event = Some(event);
            while let Some(ev) = event.take() {
                match self.absorb(ev, &mut text) {
                    Ok(None) => event = self.handle.rx.try_recv().ok(),
                    Ok(Some(reason)) => {
                        self.outcome = Some(reason);
                        return Some(Piece::Finished { text, reason });
                    }
                    Err(err) if text.is_empty() => return Some(self.fail(err)),
                    Err(err) => {
                        self.pending = Some(err);
                        return Some(Piece::Text(text));
                    }
                }
            }
            if !text.is_empty() {
                return Some(Piece::Text(text));
            }
        }
    }

    fn fail(&mut self, err: ApiError) -> Piece {
        self.outcome = Some("error");
        tracing::warn!(request_id = %self.handle.request_id(), "request failed: {err}");
        Piece::Failed(err)
    }

    /// Adds one event's text to `text`; returns the finish reason when it ended.
    fn absorb(
        &mut self,
        event: EngineEvent,
        text: &mut String,
    ) -> Result<Option<&'static str>, ApiError> {
        let output = match event {
            EngineEvent::Output(output) => output,
            EngineEvent::Dead(reason) => {
                self.handle.finished();
                return Err(ApiError::EngineDead(reason.to_string()));
            }
        };
        let finish = output
            .finish()
            .map_err(|e| ApiError::Internal(format!("bad engine output: {e}")))?;
        let ids = visible_ids(&output);
        self.completion_tokens += u32::try_from(output.new_token_ids.len()).unwrap_or(u32::MAX);
        let mut new_text = self.detokenizer.push(ids).map_err(text_error)?;
        if finish.is_some() {
            self.handle.finished();
            new_text.push_str(&self.detokenizer.finish().map_err(text_error)?);
        }
        if let Some(stop) = &mut self.stop {
            let outcome = stop.push(&new_text);
            text.push_str(&outcome.emit);
            if outcome.stopped.is_some() {
                // Our own stop: the engine may still be generating.
                self.handle.abort();
                return Ok(Some(FinishReason::Stop.as_str()));
            }
            if finish.is_some() {
                text.push_str(&stop.flush());
            }
        } else {
            text.push_str(&new_text);
        }
        match finish {
            None => Ok(None),
            Some(FinishReason::Error) => Err(ApiError::EngineError(
                output
                    .error_message
                    .unwrap_or_else(|| "the engine failed this request".into()),
            )),
            Some(reason) => Ok(Some(reason.as_str())),
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
        let id = self.handle.request_id();
        let elapsed_ms = self.started.elapsed().as_millis() as u64;
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
#[path = "stream_tests.rs"]
mod tests;
