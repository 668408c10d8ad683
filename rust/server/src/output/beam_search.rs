//! Beam search (`use_beam_search`), run above the engine as vLLM runs it: each step asks
//! the engine for one token of every live beam with the top `2 × n` log-probabilities,
//! expands each beam by those candidates, keeps the `n` best by cumulative logprob, and
//! sets aside every beam that ends with an EOS token; after `max_tokens` steps (or when no
//! beam is left) the `n` best of the finished and the live beams, ranked by cumulative
//! logprob over their length to the power `length_penalty`, are the choices. Mirrors
//! `server/output/beam_search.py` step for step (same candidates, same order, same ties),
//! so both frontends give the same beams. Behaviour: docs/api.md, "Beam search".
//!
//! The steps are ordinary engine requests on the existing wire: ADD with the prompt and
//! the beam's tokens, `max_tokens` 1, `logprobs` `2 × n`, greedy (the candidates are the
//! top `2 × n` then, as vLLM's at temperature 0), seeded `seed + i` for the search's
//! `i`-th request when the request has a `seed` (reproducible on an engine that samples,
//! such as the mock one). The engine's prefix cache makes the re-sent prefixes cheap. Each
//! step's requests enter the bounded queue ([`crate::edge::queue`]) as any others do. The
//! finished beams are then replayed to [`crate::output::generation::Generation`] as one
//! engine output each (its tokens without the EOS, its finish reason), so text, parsers,
//! usage and both response shapes are the ordinary ones.

use std::cmp::Ordering;
use std::sync::Arc;

use futures_util::future::try_join_all;
use vrs_engine_client::client::{EngineEvent, RequestHandle};
use vrs_engine_client::EngineClient;
use vrs_wire::{EngineCoreOutput, EngineCoreRequest, FinishReason, SamplingParams, TokenLogprobs};

use crate::edge::error::ApiError;
use crate::edge::metrics::{Metrics, Rejection};
use crate::edge::queue::{Queue, Ticket};
use crate::validate::params::BeamSearch;
use crate::validate::prompt::Prompt;

/// One sequence: its generated tokens (an ending EOS left out), their cumulative logprob,
/// how many tokens it generated (the EOS included: the length the penalty divides by)
/// and, once finished, why.
#[derive(Debug, Clone, PartialEq)]
pub struct Beam {
    pub tokens: Vec<u32>,
    pub cum_logprob: f64,
    pub steps: u32,
    pub finish: Option<&'static str>,
}

impl Beam {
    fn new(tokens: Vec<u32>, cum_logprob: f64, steps: u32, finish: Option<&'static str>) -> Self {
        Self {
            tokens,
            cum_logprob,
            steps,
            finish,
        }
    }
}

/// A step's candidates as vLLM's logprobs dict holds them: the sampled token first, then
/// the top ones in rank order; a token listed twice keeps its first place and its last
/// logprob.
pub fn candidates(entry: &TokenLogprobs) -> Vec<(u32, f64)> {
    let mut found = Vec::with_capacity(entry.top_token_ids.len() + 1);
    found.push((entry.token_id, entry.logprob));
    for (&token, &logprob) in entry.top_token_ids.iter().zip(&entry.top_logprobs) {
        match found.iter_mut().find(|(t, _)| *t == token) {
            Some(slot) => slot.1 = logprob,
            None => found.push((token, logprob)),
        }
    }
    found
}

/// The rank of a beam among the results (Transformers' and vLLM's length penalty).
pub fn score(beam: &Beam, length_penalty: f64) -> f64 {
    beam.cum_logprob / f64::from(beam.steps.max(1)).powf(length_penalty)
}

/// Descending, ties kept in their order (with a stable sort), as Python's
/// `sort(reverse=True)`.
fn descending(a: f64, b: f64) -> Ordering {
    b.partial_cmp(&a).unwrap_or(Ordering::Equal)
}

/// The beams of one prompt, step by step (no I/O: [`run`] feeds it).
#[derive(Debug)]
pub struct Search {
    width: usize,
    length_penalty: f64,
    eos: Vec<u32>,
    pub beams: Vec<Beam>,
    pub completed: Vec<Beam>,
}

impl Search {
    pub fn new(beam: BeamSearch, eos_token_ids: &[u32], ignore_eos: bool) -> Self {
        Self {
            width: beam.width as usize,
            length_penalty: beam.length_penalty,
            eos: if ignore_eos {
                Vec::new()
            } else {
                eos_token_ids.to_vec()
            },
            beams: vec![Beam::new(Vec::new(), 0.0, 0, None)],
            completed: Vec::new(),
        }
    }

    /// One step: `entries[i]` is the next token's logprobs of live beam `i`.
    pub fn advance(&mut self, entries: &[TokenLogprobs]) {
        let mut expanded: Vec<(f64, usize, u32)> = Vec::new();
        for (index, (beam, entry)) in self.beams.iter().zip(entries).enumerate() {
            for (token, logprob) in candidates(entry) {
                let cum = beam.cum_logprob + logprob;
                if self.eos.contains(&token) {
                    let stop = Some(FinishReason::Stop.as_str());
                    let done = Beam::new(beam.tokens.clone(), cum, beam.steps + 1, stop);
                    self.completed.push(done);
                } else {
                    expanded.push((cum, index, token));
                }
            }
        }
        expanded.sort_by(|a, b| descending(a.0, b.0));
        expanded.truncate(self.width);
        self.beams = expanded
            .into_iter()
            .map(|(cum, index, token)| {
                let beam = &self.beams[index];
                let mut tokens = Vec::with_capacity(beam.tokens.len() + 1);
                tokens.extend_from_slice(&beam.tokens);
                tokens.push(token);
                Beam::new(tokens, cum, beam.steps + 1, None)
            })
            .collect();
    }

    /// The `width` best of the finished and the live beams (live ones end at the length
    /// limit), best first.
    pub fn best(self) -> Vec<Beam> {
        let length = Some(FinishReason::Length.as_str());
        let mut done = self.completed;
        done.extend(self.beams.into_iter().map(|b| Beam {
            finish: length,
            ..b
        }));
        let penalty = self.length_penalty;
        done.sort_by(|a, b| descending(score(a, penalty), score(b, penalty)));
        done.truncate(self.width);
        done
    }
}

/// One prompt's search, done: its beams, the handle of its first step (whose engine its
/// choices' replays name) and the prompt tokens that step found cached.
pub struct Searched {
    pub beams: Vec<Beam>,
    first: RequestHandle,
    cached_tokens: u64,
}

impl Searched {
    /// Beam `index` as its choice's engine handle: one final output.
    pub fn replay(&self, index: usize, request_id: String) -> RequestHandle {
        let beam = self.beams.get(index);
        let output = EngineCoreOutput {
            request_id: request_id.clone(),
            new_token_ids: beam.map(|b| b.tokens.clone()).unwrap_or_default(),
            finish_reason: beam.and_then(|b| b.finish).map(str::to_owned),
            stop_token_id: None,
            new_logprobs: None,
            num_cached_tokens: self.cached_tokens,
            error_message: None,
            prompt_logprobs: None,
            queue_time: None,
            prefill_time: None,
            error_kind: None,
            decode_time: None,
            pooling_output: None,
        };
        self.first.replay(request_id, vec![output])
    }
}

/// What a search sends its steps through.
pub struct Engine<'a> {
    pub client: &'a Arc<EngineClient>,
    pub queue: &'a Arc<Queue>,
    pub metrics: &'a Metrics,
    /// The tokens that end a beam (the engine's EOS ids, from its READY).
    pub eos_token_ids: &'a [u32],
}

/// Every prompt's search (at once), in prompt order; the first failure drops the others
/// (their engine requests are aborted). `id`: the request's engine id.
pub async fn run(
    engine: &Engine<'_>,
    id: &str,
    prompts: &[Prompt],
) -> Result<Vec<Searched>, ApiError> {
    try_join_all(
        prompts
            .iter()
            .enumerate()
            .map(|(index, prompt)| search(engine, format!("{id}-{index}"), prompt)),
    )
    .await
}

async fn search(engine: &Engine<'_>, id: String, prompt: &Prompt) -> Result<Searched, ApiError> {
    let settings = &prompt.settings;
    let beam = settings
        .beam_search
        .ok_or_else(|| ApiError::Internal("a beam search without its settings".into()))?;
    let sampling = &settings.sampling;
    let mut search = Search::new(beam, engine.eos_token_ids, sampling.ignore_eos);
    let mut sent: i64 = 0;
    let mut first = None;
    for step in 0..sampling.max_tokens {
        let mut requests = Vec::with_capacity(search.beams.len());
        for (i, live) in search.beams.iter().enumerate() {
            let mut params = SamplingParams::new(1);
            params.temperature = 0.0;
            params.logprobs = Some(2 * beam.width);
            params.seed = sampling.seed.map(|seed| seed.wrapping_add(sent));
            sent += 1;
            let mut ids = Vec::with_capacity(prompt.ids.len() + live.tokens.len());
            ids.extend_from_slice(&prompt.ids);
            ids.extend_from_slice(&live.tokens);
            requests.push(EngineCoreRequest {
                request_id: format!("{id}-{step}-{i}"),
                prompt_token_ids: ids,
                sampling_params: params,
                arrival_time: now(),
                priority: settings.priority,
                cache_salt: settings.cache_salt.clone(),
                pooling_params: None,
            });
        }
        let mut answers = run_step(engine, requests).await?;
        let entries: Vec<TokenLogprobs> = answers.iter_mut().map(|a| a.entry.clone()).collect();
        if first.is_none() && !answers.is_empty() {
            let answer = answers.swap_remove(0);
            first = Some((answer.handle, answer.cached_tokens));
        }
        search.advance(&entries);
        if search.beams.is_empty() {
            break;
        }
    }
    let (first, cached) = first.ok_or_else(|| ApiError::Internal("a search of no step".into()))?;
    let beams = search.best();
    if beams.len() < beam.width as usize {
        return Err(ApiError::EngineError(format!(
            "the beam search found {} sequences for n = {}: the engine offered too few \
             candidate tokens",
            beams.len(),
            beam.width
        )));
    }
    Ok(Searched {
        beams,
        first,
        cached_tokens: cached.min(prompt.ids.len() as u64),
    })
}

/// A step request's answer: its token's logprobs, its handle (finished) and the prompt
/// tokens it found cached.
struct Answer {
    entry: TokenLogprobs,
    handle: RequestHandle,
    cached_tokens: u64,
}

/// Sends one step's requests (through the queue) and waits for each one's token.
/// Whatever ends it early drops the handles still running, which aborts them.
async fn run_step(
    engine: &Engine<'_>,
    requests: Vec<EngineCoreRequest>,
) -> Result<Vec<Answer>, ApiError> {
    let sizes: Vec<usize> = requests.iter().map(|r| r.prompt_token_ids.len()).collect();
    let mut tickets = engine
        .queue
        .enter(&sizes)
        .inspect_err(|err| {
            if let Some(reason) = err.rejection() {
                engine.metrics.rejected(reason);
            }
        })?
        .into_iter();
    let mut running = Vec::with_capacity(requests.len());
    for request in requests {
        running.push((engine.client.submit(request)?, tickets.next()));
    }
    let mut answers = Vec::with_capacity(running.len());
    for (handle, ticket) in running {
        answers.push(answer(handle, ticket, engine.metrics).await?);
    }
    Ok(answers)
}

/// A step request's token (see [`run_step`]); past the queue's deadline, its 503.
async fn answer(
    mut handle: RequestHandle,
    mut ticket: Option<Ticket>,
    metrics: &Metrics,
) -> Result<Answer, ApiError> {
    let mut entry: Option<TokenLogprobs> = None;
    let mut cached = 0;
    loop {
        let event = match ticket.as_ref().and_then(Ticket::deadline) {
            Some(at) => match tokio::time::timeout_at(at, handle.recv()).await {
                Ok(event) => event,
                Err(_) => {
                    metrics.rejected(Rejection::QueueWaitTimeout);
                    return Err(ticket.map_or_else(
                        || ApiError::Internal("a queued step without a ticket".into()),
                        |t| t.timeout_error(),
                    ));
                }
            },
            None => handle.recv().await,
        };
        ticket = None;
        let output = match event {
            Some(EngineEvent::Output(output)) => output,
            Some(EngineEvent::Dead(reason)) => {
                handle.finished();
                return Err(ApiError::EngineDead(reason.to_string()));
            }
            None => return Err(ApiError::from(handle.closed_error())),
        };
        cached = cached.max(output.num_cached_tokens);
        if entry.is_none() {
            entry = output
                .new_logprobs
                .and_then(|mut l| (!l.is_empty()).then(|| l.swap_remove(0)));
        }
        let Some(reason) = output.finish_reason else {
            continue;
        };
        handle.finished();
        let error = reason == FinishReason::Error.as_str();
        return match entry {
            Some(entry) if !error => Ok(Answer {
                entry,
                handle,
                cached_tokens: cached,
            }),
            _ => Err(ApiError::EngineError(output.error_message.unwrap_or_else(
                || {
                    if error {
                        "the engine failed a beam search step".into()
                    } else {
                        format!("the engine ended a beam search step ({reason}) without its token")
                    }
                },
            ))),
        };
    }
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests;
