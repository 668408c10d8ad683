//! One pooling request from arrival to the engine's answers: the runner checked, a slot
//! under the concurrency limit, the body under the size limit ([`Job::accept`]); then its
//! prompts sent to the engine as separate requests, all at once, through the queue
//! ([`Job::run`]), each answered by its one final output. A client that goes away drops
//! the future, and with it the request handles, which aborts the engine requests.
//! Mirrors `server/routes/pooling/dispatch.py`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use futures_util::future::try_join_all;
use serde_json::Value;
use vrs_engine_client::{EngineEvent, RequestHandle};
use vrs_wire::{EngineCoreOutput, PoolingParams, SamplingParams};

use crate::dispatch::{now_f64, rejected};
use crate::edge::admission::Permit;
use crate::edge::body::request_body;
use crate::edge::error::ApiError;
use crate::edge::queue::Ticket;
use crate::edge::request_id;
use crate::edge::trace::{self, RequestTrace};
use crate::edge::vllm_metrics::Finished;
use crate::state::{unix_now, AppState};
use crate::validate::engine_fields;

/// A pooling request past admission, holding its slot.
pub struct Job {
    /// The response's id, `PREFIX-<request id>`.
    pub id: String,
    /// The engine request's id; with several prompts, each's is `<engine_id>-<index>`.
    engine_id: String,
    pub created: u64,
    pub body: Bytes,
    arrival: Instant,
    trace: Option<Arc<RequestTrace>>,
    _permit: Permit,
}

/// One engine request of a job.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    pub ids: Vec<u32>,
    pub params: PoolingParams,
}

/// The engine fields of a pooling request: `priority` and `cache_salt`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scheduling {
    pub priority: i64,
    pub cache_salt: Option<String>,
}

impl Scheduling {
    /// The body's `priority` and `cache_salt`, checked as for generation.
    pub fn of(state: &AppState, body: &Value) -> Result<Self, ApiError> {
        let field = |name: &str| body.get(name).filter(|v| !v.is_null());
        Ok(Self {
            priority: engine_fields::priority(
                field("priority"),
                Some(state.options.scheduling_policy),
            )?,
            cache_salt: field("cache_salt")
                .map(engine_fields::cache_salt)
                .transpose()?,
        })
    }
}

/// The engine's answer to one prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Pooled {
    pub values: Vec<f64>,
    pub prompt_tokens: usize,
}

impl Job {
    /// The request admitted ([`crate::state::Serves::refuse_pooling`] first, so a generation engine
    /// takes no slot), its body read; ids `<prefix>-<request id>`.
    pub fn accept(
        state: &AppState,
        body: Result<Bytes, BytesRejection>,
        prefix: &str,
    ) -> Result<Self, ApiError> {
        let trace = trace::begin();
        let arrival = Instant::now();
        state.serves.refuse_pooling()?;
        let permit = state
            .admission
            .enter()
            .inspect_err(|err| rejected(state, err))?;
        let body = request_body(body, state.options.max_request_body)?;
        let (id, engine_id) = request_id::engine_id(prefix);
        Ok(Self {
            id,
            engine_id,
            created: unix_now(),
            body,
            arrival,
            trace,
            _permit: permit,
        })
    }

    /// The engine's answers to `prompts`, in order; the first failure fails them all
    /// (and aborts the others).
    pub async fn run(
        &self,
        state: &AppState,
        prompts: Vec<Prompt>,
        scheduling: &Scheduling,
    ) -> Result<Vec<Pooled>, ApiError> {
        let sizes: Vec<usize> = prompts.iter().map(|p| p.ids.len()).collect();
        let mut tickets = state
            .queue
            .enter(&sizes)
            .inspect_err(|err| rejected(state, err))?
            .into_iter();
        let arrival_time = now_f64();
        let mut waits = Vec::with_capacity(prompts.len());
        for (index, prompt) in prompts.into_iter().enumerate() {
            state.metrics.prompt_tokens(prompt.ids.len());
            let request = vrs_wire::EngineCoreRequest {
                request_id: if sizes.len() == 1 {
                    self.engine_id.clone()
                } else {
                    format!("{}-{index}", self.engine_id)
                },
                prompt_token_ids: prompt.ids,
                sampling_params: SamplingParams::new(1),
                arrival_time,
                priority: scheduling.priority,
                cache_salt: scheduling.cache_salt.clone(),
                pooling_params: Some(prompt.params),
            };
            let handle = state.client.submit(request)?;
            waits.push(self.answer(state, handle, tickets.next(), (index, sizes[index])));
        }
        if let Some(trace) = &self.trace {
            trace.queued(&self.id, sizes.iter().copied());
        }
        tracing::debug!(
            request_id = %self.id,
            engine_request_id = %self.engine_id,
            prompts = sizes.len(),
            prompt_tokens = sizes.iter().sum::<usize>(),
            "accepted"
        );
        let all = try_join_all(waits);
        match state.options.request_timeout {
            None => all.await,
            Some(timeout) => {
                let at = tokio::time::Instant::from_std(self.arrival + timeout);
                tokio::time::timeout_at(at, all).await.unwrap_or_else(|_| {
                    Err(ApiError::Timeout(format!("{}", timeout.as_secs_f64())))
                })
            }
        }
    }

    /// The final output of engine request `index` (of `prompt_tokens` tokens): its
    /// values, or why it failed (an `invalid_request` refusal is a 400). Waits in the
    /// queue until the ticket's deadline at most (503 past it).
    async fn answer(
        &self,
        state: &AppState,
        mut handle: RequestHandle,
        ticket: Option<Ticket>,
        (index, prompt_tokens): (usize, usize),
    ) -> Result<Pooled, ApiError> {
        let mut ticket = ticket;
        let output = loop {
            let event = match ticket.as_ref().and_then(Ticket::deadline) {
                None => handle.recv().await,
                Some(at) => match tokio::time::timeout_at(at, handle.recv()).await {
                    Ok(event) => event,
                    Err(_) => {
                        handle.abort();
                        let err = ticket.map_or_else(
                            || ApiError::Internal("a deadline without a ticket".into()),
                            |t| t.timeout_error(),
                        );
                        rejected(state, &err);
                        return Err(err);
                    }
                },
            };
            ticket = None; // out of the queue at the first output
            match event {
                None => return Err(handle.closed_error().into()),
                Some(EngineEvent::Dead(reason)) => {
                    return Err(ApiError::EngineDead(reason.to_string()))
                }
                Some(EngineEvent::Output(output)) if output.finish_reason.is_none() => {
                    if let Some(trace) = &self.trace {
                        trace.output(index, &output);
                    }
                }
                Some(EngineEvent::Output(output)) => break output,
            }
        };
        handle.finished();
        let e2e = self.arrival.elapsed();
        state.metrics.e2e.observe(e2e);
        if let Some(trace) = &self.trace {
            trace.output(index, &output);
            trace.finished(
                match output.finish_reason.as_deref() {
                    Some("error") => "error",
                    Some("abort") => "abort",
                    _ => "stop",
                },
                0,
            );
        }
        let message = || {
            output
                .error_message
                .clone()
                .unwrap_or_else(|| "the engine failed this request".into())
        };
        match (
            output.finish_reason.as_deref(),
            output.pooling_output.as_ref(),
        ) {
            (Some("stop" | "length"), Some(values)) => {
                report(state, handle.engine_index(), &output, (prompt_tokens, e2e));
                Ok(Pooled {
                    values: values.clone(),
                    prompt_tokens,
                })
            }
            (Some("error"), _) if output.is_invalid_request() => {
                Err(ApiError::bad_request(message()))
            }
            (Some("error"), _) => Err(ApiError::EngineError(message())),
            (Some("abort"), _) => Err(ApiError::Unavailable(
                "the engine aborted the request".into(),
            )),
            _ => Err(ApiError::Internal(format!(
                "the engine answered pooling request {} without a pooling output",
                output.request_id
            ))),
        }
    }
}

/// The `vllm:*` series of a pooling request that engine `engine` answered (`output`)
/// after `e2e`: its queue and prefill times, prompt tokens and success, no generation.
fn report(
    state: &AppState,
    engine: u32,
    output: &EngineCoreOutput,
    (prompt, e2e): (usize, Duration),
) {
    let vllm = &state.metrics.vllm;
    let prompt_tokens = u32::try_from(prompt).unwrap_or(u32::MAX);
    if let Some(queue) = output.queue_time {
        vllm.queue(engine, queue);
    }
    if let Some(prefill) = output.prefill_time {
        vllm.prefill(engine, prefill);
    }
    vllm.first_token(engine, prompt_tokens, e2e.as_secs_f64());
    vllm.finished(
        engine,
        &Finished {
            reason: "stop",
            e2e: e2e.as_secs_f64(),
            decode: None,
            prefill: output.prefill_time,
            prompt_tokens,
            generation_tokens: 0,
        },
    );
}
