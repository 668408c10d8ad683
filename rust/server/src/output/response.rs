//! The response of a generation request: its choices' generations, streamed (SSE, with
//! keep-alive comments from [`sse::keep_alive`]) or whole (one JSON body), within the
//! request's deadline; the endpoint's chunk and body shapes come from a [`Shapes`]. Mirrors
//! `server/output/response.py`. Behaviour: docs/api.md, "Responses", "Continuous usage",
//! "SSE keep-alive".

use std::convert::Infallible;
use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{self, SelectAll, Stream, StreamExt};
use tokio::time::Instant;

use crate::edge::admission::Permit;
use crate::edge::error::{ApiError, Dialect};
use crate::openai::Usage;
use crate::output::batch::total;
use crate::output::generation::{Generation, Piece};
use crate::output::sse;

/// The endpoint's response shapes for one response (all its choices).
pub trait Shapes: Send + 'static {
    /// Events sent before any text (chat: the assistant role of each choice).
    fn start(&mut self, buf: &mut Vec<u8>);
    /// The event(s) of choice `index`'s next piece (maybe none); `usage` is the
    /// choice's so far (for `continuous_usage_stats`).
    fn step(&mut self, index: usize, piece: Piece, usage: Usage, buf: &mut Vec<u8>);
    /// Choice `index`'s next piece, for the whole response (no event).
    fn absorb(&mut self, index: usize, piece: Piece);
    /// The `include_usage` event: no choices, the usage.
    fn usage(&self, buf: &mut Vec<u8>, usage: Usage);
    /// The whole non-streamed response body.
    fn body(self, usage: Usage) -> Vec<u8>;
    /// The API whose error shape this response's errors take.
    fn dialect(&self) -> Dialect {
        Dialect::OpenAi
    }
    /// The stream's tail once every choice finished: the `include_usage` event when
    /// asked for, then `[DONE]`.
    fn finish(&mut self, buf: &mut Vec<u8>, usage: Usage, include_usage: bool) {
        if include_usage {
            self.usage(buf, usage);
        }
        buf.extend_from_slice(sse::DONE);
    }
    /// The stream's end on a failure after it started: the error event, then `[DONE]`.
    fn failure(&mut self, buf: &mut Vec<u8>, err: &ApiError) {
        buf.extend_from_slice(&sse::error_event(err));
    }
}

/// When the request must be done, and the configured timeout (for the message).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    pub at: Instant,
    pub timeout: Duration,
}

impl Deadline {
    /// The request's 504 (or its SSE error event).
    pub fn error(&self) -> ApiError {
        ApiError::Timeout(format!("{}", self.timeout.as_secs_f64()))
    }
}

/// One choice's piece, with its usage so far.
type Item = (usize, Result<Piece, ApiError>, Usage);
type Pieces = SelectAll<Pin<Box<dyn Stream<Item = Item> + Send>>>;

/// The choices' pieces as they come; `first`: choice 0's first item, already taken.
/// Dropping it drops the generations (which aborts the unfinished ones).
fn pieces(generations: Vec<Generation>, mut first: Option<Item>) -> Pieces {
    stream::select_all(
        generations
            .into_iter()
            .enumerate()
            .map(|(index, generation)| {
                let taken = if index == 0 { first.take() } else { None };
                let each = stream::unfold(generation, move |mut g| async move {
                    let next = g.next().await?;
                    let usage = g.usage();
                    Some(((index, next, usage), g))
                });
                let each = stream::iter(taken).chain(each);
                Box::pin(each) as Pin<Box<dyn Stream<Item = Item> + Send>>
            }),
    )
}

/// Choice 0's first item, awaited before a constrained stream's head: `Err` with the
/// response when it is the engine's refusal of the spec (a 400) or the queue's wait
/// limit (a 503: no byte was sent yet). A deadline passed here
/// is left to the stream (its next wait ends at once).
async fn first_item(
    generations: &mut [Generation],
    deadline: Option<Deadline>,
    dialect: Dialect,
) -> Result<Option<Item>, Response> {
    let Some(generation) = generations.first_mut() else {
        return Ok(None);
    };
    let next = match deadline {
        None => generation.next().await,
        Some(d) => match tokio::time::timeout_at(d.at, generation.next()).await {
            Ok(next) => next,
            Err(_) => return Ok(None),
        },
    };
    match next {
        Some(Err(err @ (ApiError::BadRequest { .. } | ApiError::QueueTimeout(_)))) => {
            Err(err.respond(dialect))
        }
        Some(next) => Ok(Some((0, next, generation.usage()))),
        None => Ok(None),
    }
}

/// The next item before the deadline; `Err` when it passed.
async fn next_item(
    pieces: &mut Pieces,
    deadline: Option<Deadline>,
) -> Result<Option<Item>, ApiError> {
    match deadline {
        None => Ok(pieces.next().await),
        Some(d) => tokio::time::timeout_at(d.at, pieces.next())
            .await
            .map_err(|_| d.error()),
    }
}

struct Streaming<S> {
    pieces: Pieces,
    shapes: S,
    usages: Vec<Usage>,
    /// Choices per prompt.
    n: usize,
    include_usage: bool,
    deadline: Option<Deadline>,
    started: bool,
    done: bool,
    _permit: Permit,
}

/// Settings of a streamed response.
#[derive(Debug, Clone, Copy)]
pub struct StreamOptions {
    pub include_usage: bool,
    /// Choices per prompt.
    pub n: usize,
    pub deadline: Option<Deadline>,
    /// A structured-output constraint: the head waits for choice 0's first output.
    pub constrained: bool,
    /// `--sse-keep-alive-interval`.
    pub keep_alive: Option<Duration>,
}

/// The SSE response (or, constrained, the 400 of a refused spec).
pub async fn stream<S: Shapes>(
    mut generations: Vec<Generation>,
    shapes: S,
    options: StreamOptions,
    permit: Permit,
) -> Response {
    let StreamOptions {
        include_usage,
        n,
        deadline,
        constrained,
        keep_alive,
    } = options;
    let first = if constrained {
        match first_item(&mut generations, deadline, shapes.dialect()).await {
            Ok(first) => first,
            Err(refused) => return refused,
        }
    } else {
        None
    };
    let state = Streaming {
        usages: generations.iter().map(Generation::usage).collect(),
        pieces: pieces(generations, first),
        shapes,
        n,
        include_usage,
        deadline,
        started: false,
        done: false,
        _permit: permit,
    };
    let body = stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        let mut buf = Vec::with_capacity(512);
        if !st.started {
            st.started = true;
            st.shapes.start(&mut buf);
            if !buf.is_empty() {
                return Some((Ok::<_, Infallible>(Bytes::from(buf)), st));
            }
        }
        loop {
            match next_item(&mut st.pieces, st.deadline).await {
                Ok(Some((index, Ok(piece), usage))) => {
                    st.usages[index] = usage;
                    st.shapes.step(index, piece, usage, &mut buf);
                    if !buf.is_empty() {
                        break;
                    }
                }
                Ok(Some((_, Err(err), _))) | Err(err) => {
                    st.done = true;
                    st.pieces = stream::select_all(Vec::new());
                    st.shapes.failure(&mut buf, &err);
                    break;
                }
                Ok(None) => {
                    let usage = total(&st.usages, st.n);
                    st.shapes.finish(&mut buf, usage, st.include_usage);
                    st.done = true;
                    break;
                }
            }
        }
        Some((Ok(Bytes::from(buf)), st))
    });
    match keep_alive {
        Some(every) => sse::response(Body::from_stream(sse::keep_alive(body, every))),
        None => sse::response(Body::from_stream(body)),
    }
}

/// The non-streamed response: waits for the end of every choice, then one JSON body.
pub async fn complete<S: Shapes>(
    generations: Vec<Generation>,
    mut shapes: S,
    n: usize,
    deadline: Option<Deadline>,
    _permit: Permit,
) -> Response {
    let mut usages: Vec<Usage> = generations.iter().map(Generation::usage).collect();
    let mut pieces = pieces(generations, None);
    loop {
        match next_item(&mut pieces, deadline).await {
            Ok(Some((index, Ok(piece), usage))) => {
                usages[index] = usage;
                shapes.absorb(index, piece);
            }
            Ok(Some((_, Err(err), _))) | Err(err) => return err.respond(shapes.dialect()),
            Ok(None) => break,
        }
    }
    let body = shapes.body(total(&usages, n));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
