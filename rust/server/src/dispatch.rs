//! Dispatch of a generation request (chat or completions): admission, the body, the
//! prompt; then the accepted request's prompt ids + checked settings → the engine → the
//! response (streamed or whole).

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::response::Response;

use crate::edge::admission::Permit;
use crate::edge::body::request_body;
use crate::edge::error::text_error;
use crate::edge::error::{ApiError, Dialect};
use crate::edge::request_id;
use crate::edge::trace;
use crate::output::batch;
use crate::output::beam_search;
use crate::output::generation::Generation;
use crate::output::observer::Observer;
use crate::output::response::{self, Deadline, Shapes, StreamOptions};
use crate::state::{unix_now, AppState, SharedState};
use crate::validate::prompt::{ChatOutput, Prompt};

/// Prompt tokens kept to seed the incremental detokenizer.
const DETOKENIZER_SEED: usize = 8;

/// A generation request past every check, holding its admission permit.
pub struct AcceptedRequest {
    /// The response's id, `PREFIX-<request id>` ([`crate::edge::request_id`]).
    pub id: String,
    /// The engine request id (the id of choice 0, choices' ids end in `-<index>`):
    /// unique even when clients reuse their `X-Request-Id`.
    pub engine_id: String,
    pub created: u64,
    /// The prompts (one, except for a batched completions request), each with its own
    /// checked settings; all share `n` and the output settings.
    pub prompts: Vec<Prompt>,
    arrival: Instant,
    permit: Permit,
}

/// A request's public id: `PREFIX-<32 hex digits>`, or `PREFIX-<X-Request-Id>` with
/// request ids on ([`request_id::public_id`]).
pub fn request_id(prefix: &str) -> String {
    request_id::public_id(prefix)
}

/// A generation request (chat or completions) from arrival to answer: a slot under the
/// concurrency limit, the body under the size limit, the prompts `build` makes of it, then
/// the engine's answer in the `shapes` made for the job (ids `chatcmpl-…` for a chat
/// prompt, `cmpl-…` for a completion).
pub async fn generate<'a, P, S>(
    state: &'a SharedState,
    body: Result<Bytes, BytesRejection>,
    build: impl FnOnce(&'a SharedState, Bytes) -> P,
    shapes: impl FnOnce(&AcceptedRequest, &AppState) -> Result<S, ApiError>,
) -> Response
where
    P: Future<Output = Result<Vec<Prompt>, ApiError>>,
    S: Shapes,
{
    generate_as(state, body, build, shapes, Dialect::OpenAi, None).await
}

/// [`generate`] for another API on the chat pipeline (Responses, Anthropic Messages):
/// errors before the shapes exist take `dialect`'s shape, and the request id is
/// `<id_prefix>-<32 hex digits>` (`None`: chat's or completions' prefix).
pub async fn generate_as<'a, P, S>(
    state: &'a SharedState,
    body: Result<Bytes, BytesRejection>,
    build: impl FnOnce(&'a SharedState, Bytes) -> P,
    shapes: impl FnOnce(&AcceptedRequest, &AppState) -> Result<S, ApiError>,
    dialect: Dialect,
    id_prefix: Option<&'static str>,
) -> Response
where
    P: Future<Output = Result<Vec<Prompt>, ApiError>>,
    S: Shapes,
{
    // The request's span (when traces are on) starts now: a refused request has one too.
    let _trace = trace::begin();
    let job = match accept(state, body, build, id_prefix).await {
        Ok(job) => job,
        Err(err) => return err.respond(dialect),
    };
    match shapes(&job, state) {
        Ok(shapes) => job.respond(state, shapes).await,
        Err(err) => err.respond(dialect),
    }
}

/// The first half of [`generate_as`]: admission, the body, the prompts, the ids; the
/// accepted request then answers through [`AcceptedRequest::respond`] (the Responses
/// API's background runs do so on their own task).
pub async fn accept<'a, P>(
    state: &'a SharedState,
    body: Result<Bytes, BytesRejection>,
    build: impl FnOnce(&'a SharedState, Bytes) -> P,
    id_prefix: Option<&'static str>,
) -> Result<AcceptedRequest, ApiError>
where
    P: Future<Output = Result<Vec<Prompt>, ApiError>>,
{
    let arrival = Instant::now();
    let (prompts, permit) = prepare(state, body, build).await?;
    let id_prefix = id_prefix.unwrap_or_else(|| {
        if prompts.first().is_some_and(|p| p.chat.is_some()) {
            "chatcmpl"
        } else {
            "cmpl"
        }
    });
    Ok(AcceptedRequest::new(prompts, id_prefix, arrival, permit))
}

async fn prepare<'a, P>(
    state: &'a SharedState,
    body: Result<Bytes, BytesRejection>,
    build: impl FnOnce(&'a SharedState, Bytes) -> P,
) -> Result<(Vec<Prompt>, Permit), ApiError>
where
    P: Future<Output = Result<Vec<Prompt>, ApiError>>,
{
    state.serves.refuse_generation()?;
    let permit = state
        .admission
        .enter()
        .inspect_err(|err| rejected(state, err))?;
    let body = request_body(body, state.options.max_request_body)?;
    Ok((build(state, body).await?, permit))
}

impl AcceptedRequest {
    /// An accepted request (its prompt already checked against the context length),
    /// admitted by `permit`, that arrived at `arrival`.
    pub fn new(prompts: Vec<Prompt>, id_prefix: &str, arrival: Instant, permit: Permit) -> Self {
        let (id, engine_id) = request_id::engine_id(id_prefix);
        Self {
            id,
            engine_id,
            created: unix_now(),
            prompts,
            arrival,
            permit,
        }
    }

    /// The id after its prefix (32 hex digits, or the client's `X-Request-Id`), for an
    /// API's own ids (`resp_<hex>`, `msg_<hex>`).
    pub fn hex(&self) -> &str {
        self.id.split_once('-').map_or(&self.id, |(_, rest)| rest)
    }

    /// The first prompt (the only one but in a batched completions request).
    pub fn prompt(&self) -> Result<&Prompt, ApiError> {
        self.prompts
            .first()
            .ok_or_else(|| ApiError::Internal("a request without a prompt".into()))
    }

    /// Submits the `n` choices of each prompt to the engine ([`batch::fan_out`]) and
    /// answers in `shapes`.
    pub async fn respond<S: Shapes>(self, state: &AppState, shapes: S) -> Response {
        let Self {
            id,
            engine_id,
            prompts,
            arrival,
            permit,
            ..
        } = self;
        let Some(settings) = prompts.first().map(|p| p.settings.clone()) else {
            return ApiError::Internal("a request without a prompt".into())
                .respond(shapes.dialect());
        };
        let n = settings.n.max(1) as usize;
        // A chat answer split by the reasoning parser counts its reasoning tokens.
        let reasoning = state
            .options
            .reasoning_parser
            .and_then(crate::parsers::reasoning::markers_of)
            .is_some();
        let deadline = state.options.request_timeout.map(|timeout| Deadline {
            at: tokio::time::Instant::from_std(arrival + timeout),
            timeout,
        });
        // A beam search runs its steps first; its choices then replay its beams.
        let searched = match settings.beam_search {
            None => None,
            Some(_) => match search(state, &engine_id, &prompts, deadline).await {
                Ok(searched) => Some(searched),
                Err(err) => return err.respond(shapes.dialect()),
            },
        };
        let trace = trace::begin();
        let observers: Vec<Observer> = prompts
            .iter()
            .enumerate()
            .map(|(index, p)| {
                state.metrics.prompt_tokens(p.ids.len());
                Observer::new(Arc::clone(&state.metrics), arrival, settings.n.max(1))
                    .traced(trace.clone(), index)
            })
            .collect();
        let requests = batch::fan_out(&engine_id, &prompts, now_f64());
        let sizes: Vec<usize> = requests.iter().map(|r| r.prompt_token_ids.len()).collect();
        let queued = if searched.is_some() {
            Ok(Vec::new()) // the search's steps went through the queue
        } else {
            state.queue.enter(&sizes)
        };
        let mut tickets = match queued {
            Ok(tickets) => tickets.into_iter(),
            Err(err) => {
                rejected(state, &err);
                return err.respond(shapes.dialect());
            }
        };
        let mut generations = Vec::with_capacity(requests.len());
        for (index, request) in requests.into_iter().enumerate() {
            let ids = &prompts[index / n].ids;
            let tail = &ids[ids.len().saturating_sub(DETOKENIZER_SEED)..];
            let submitted = match &searched {
                Some(searched) => Ok(searched[index / n].replay(index % n, request.request_id)),
                None => state.client.submit(request),
            };
            let handle = match submitted {
                Ok(handle) => handle,
                Err(err) => return ApiError::from(err).respond(shapes.dialect()),
            };
            match Generation::new(
                handle,
                &state.tokenizer,
                tail,
                settings.skip_special_tokens,
                &settings.stop,
                ids.len(),
                observers[index / n].clone(),
            ) {
                Ok(g) => generations.push(
                    g.echo_only(settings.echo_only)
                        .constraint(settings.constraint)
                        .token_offsets(
                            reasoning
                                && prompts[index / n]
                                    .chat
                                    .as_ref()
                                    .is_some_and(ChatOutput::splits_reasoning),
                        )
                        .token_ids(settings.extras.token_ids)
                        .queued(tickets.next()),
                ),
                Err(err) => return text_error(err).respond(shapes.dialect()),
            }
        }
        if let Some(trace) = &trace {
            trace.queued(&id, prompts.iter().map(|p| p.ids.len()));
        }
        tracing::debug!(
            request_id = %id,
            engine_request_id = %engine_id,
            prompts = prompts.len(),
            prompt_tokens = prompts.iter().map(|p| p.ids.len()).sum::<usize>(),
            max_tokens = settings.sampling.max_tokens,
            n,
            stream = settings.stream,
            user = settings.user.as_deref().unwrap_or(""),
            "accepted"
        );
        if settings.stream {
            let options = StreamOptions {
                include_usage: settings.include_usage,
                n,
                deadline,
                constrained: settings.constraint.is_some(),
                keep_alive: state.options.sse_keep_alive,
            };
            response::stream(generations, shapes, options, permit).await
        } else {
            response::complete(generations, shapes, n, deadline, permit).await
        }
    }
}

/// The prompts' beam searches ([`beam_search`]) within the request's deadline (504 past
/// it). A client that goes away drops this future, and with it the steps' handles, which
/// aborts their engine requests.
async fn search(
    state: &AppState,
    engine_id: &str,
    prompts: &[Prompt],
    deadline: Option<Deadline>,
) -> Result<Vec<beam_search::Searched>, ApiError> {
    let engine = beam_search::Engine {
        client: &state.client,
        queue: &state.queue,
        metrics: &state.metrics,
        eos_token_ids: &state.eos_token_ids,
    };
    let run = beam_search::run(&engine, engine_id, prompts);
    match deadline {
        None => run.await,
        Some(deadline) => tokio::time::timeout_at(deadline.at, run)
            .await
            .unwrap_or_else(|_| Err(deadline.error())),
    }
}

/// Counts a refusal for overload (`vrs:requests_rejected_total`).
pub(crate) fn rejected(state: &AppState, err: &ApiError) {
    if let Some(reason) = err.rejection() {
        state.metrics.rejected(reason);
    }
}

/// Unix time in seconds (the engine request's `arrival_time`).
pub(crate) fn now_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
