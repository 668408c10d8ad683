//! The stored-response routes (`GET` / `DELETE /v1/responses/{id}`, `POST .../cancel`,
//! `GET .../input_items`) and the background runs of `POST /v1/responses` over the store
//! ([`super::store`]). Mirrors `server/routes/responses/stored.py`. Behaviour:
//! docs/api.md, "Responses API: store and background".

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::dispatch::AcceptedRequest;
use crate::edge::error::ApiError;
use crate::state::SharedState;

use super::store::{Cell, ResponseStore, ENDING_EVENTS, TERMINAL};
use super::ResponseShapes;

/// The routes' state: the server's and the store.
pub type Stored = (SharedState, Arc<ResponseStore>);

fn json_response(value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// The query's parameters, each one `allowed` (else a 400 naming it).
fn query(raw: Option<String>, allowed: &[&str]) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for pair in raw
        .as_deref()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (key, value) = (decode(key), decode(value));
        if !allowed.contains(&key.as_str()) {
            return Err(ApiError::bad(
                key.clone(),
                format!("unknown query parameter '{key}'"),
            ));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// A query component percent-decoded (`+` is a space).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn get<'a>(query: &'a [(String, String)], key: &str) -> Option<&'a str> {
    query
        .iter()
        .rev()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn integer(
    query: &[(String, String)],
    key: &str,
    low: i64,
    high: Option<i64>,
) -> Result<Option<i64>, ApiError> {
    let Some(value) = get(query, key) else {
        return Ok(None);
    };
    let number = value.parse::<i64>().unwrap_or(low - 1);
    if number < low || high.is_some_and(|h| number > h) {
        let bound = match high {
            Some(h) => format!("an integer >= {low} and <= {h}"),
            None => format!("an integer >= {low}"),
        };
        return Err(ApiError::bad(
            key,
            format!("invalid value for '{key}': expected {bound}"),
        ));
    }
    Ok(Some(number))
}

fn flag(query: &[(String, String)], key: &str) -> Result<bool, ApiError> {
    match get(query, key)
        .unwrap_or("false")
        .to_ascii_lowercase()
        .as_str()
    {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(ApiError::bad(
            key,
            format!("invalid value for '{key}': expected true or false"),
        )),
    }
}

/// A background stream's events after `starting_after` (their sequence numbers count
/// from 0), as they come, until the final one (or the run's end).
pub fn events_of(cell: Arc<Cell>, starting_after: Option<i64>) -> Response {
    let start = starting_after.map_or(0, |n| (n + 1).max(0) as usize);
    let stream =
        futures_util::stream::unfold((cell, start, false), |(cell, mut index, done)| async move {
            if done {
                return None;
            }
            let mut changed = cell.changed.subscribe();
            loop {
                {
                    let entry = cell.lock();
                    let events = entry.events.as_deref().unwrap_or(&[]);
                    if let Some(event) = events.get(index).cloned() {
                        index += 1;
                        let ends = ENDING_EVENTS.iter().any(|e| event.starts_with(e));
                        return Some((Ok::<_, std::io::Error>(event), (cell.clone(), index, ends)));
                    }
                    if !entry.running() {
                        return None;
                    }
                }
                if changed.changed().await.is_err() {
                    return None;
                }
            }
        });
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        [(header::HeaderName::from_static("x-accel-buffering"), "no")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// `GET /v1/responses/{id}`: the response, or (`stream=true`) a background stream's
/// events after `starting_after`.
pub async fn retrieve(
    State((_, store)): State<Stored>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = query(raw, &["stream", "starting_after"])?;
    let stream = flag(&query, "stream")?;
    let starting_after = integer(&query, "starting_after", -1, None)?;
    let cell = store.found(&id)?;
    let entry = cell.lock();
    if stream && entry.events.is_some() {
        drop(entry);
        return Ok(events_of(cell, starting_after));
    }
    if stream && !TERMINAL.contains(&entry.status()) {
        return Err(ApiError::bad(
            "stream",
            "this response was not created with background and stream: retrieve it \
             without stream",
        ));
    }
    Ok(json_response(&entry.response))
}

/// `POST /v1/responses/{id}/cancel`: a background run's end (its engine request
/// aborted), status `cancelled`; vLLM's 400 for one that is not running.
pub async fn cancel(
    State((_, store)): State<Stored>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let cell = store.found(&id)?;
    let mut entry = cell.lock();
    if !matches!(entry.status(), "queued" | "in_progress") {
        return Err(ApiError::bad(
            "response_id",
            "Cannot cancel a synchronous response.",
        ));
    }
    entry.set_status("cancelled");
    if let Some(task) = &entry.task {
        task.abort();
    }
    let response = json_response(&entry.response);
    drop(entry);
    cell.notify();
    Ok(response)
}

/// `DELETE /v1/responses/{id}` (OpenAI's; vLLM has none): forgets the response (a
/// background run is cancelled).
pub async fn delete(
    State((_, store)): State<Stored>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let cell = store.found(&id)?;
    store.delete(&id);
    if let Some(task) = &cell.lock().task {
        task.abort();
    }
    cell.notify();
    Ok(json_response(
        &json!({"id": id, "object": "response.deleted", "deleted": true}),
    ))
}

/// `GET /v1/responses/{id}/input_items` (OpenAI's; vLLM has none): the request's input
/// items, newest first unless `order=asc`, `limit` (1 to 100, default 20) after the item
/// `after`.
pub async fn input_items(
    State((_, store)): State<Stored>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let query = query(raw, &["limit", "order", "after"])?;
    let limit = integer(&query, "limit", 1, Some(100))?.unwrap_or(20) as usize;
    let order = get(&query, "order").unwrap_or("desc");
    if order != "asc" && order != "desc" {
        return Err(ApiError::bad(
            "order",
            "invalid value for 'order': expected asc or desc",
        ));
    }
    let cell = store.found(&id)?;
    let mut items = cell.lock().items.clone();
    if order == "desc" {
        items.reverse();
    }
    if let Some(after) = get(&query, "after") {
        let position = items
            .iter()
            .position(|i| i.get("id").and_then(Value::as_str) == Some(after));
        let Some(position) = position else {
            return Err(ApiError::bad(
                "after",
                format!("no input item '{after}' in this response"),
            ));
        };
        items.drain(..=position);
    }
    let has_more = items.len() > limit;
    items.truncate(limit);
    let id_of = |item: Option<&Value>| item.and_then(|i| i.get("id")).cloned();
    let (first_id, last_id) = (id_of(items.first()), id_of(items.last()));
    Ok(json_response(&json!({
        "object": "list", "data": items, "first_id": first_id, "last_id": last_id,
        "has_more": has_more,
    })))
}

/// Keeps the `queued` response, starts its run, answers it (or, streamed, the run's
/// events as they come).
pub fn start_background(
    state: SharedState,
    store: &ResponseStore,
    job: AcceptedRequest,
    mut shapes: ResponseShapes,
    cell: Arc<Cell>,
    stream: bool,
) -> Response {
    let id = shapes.id().to_owned();
    {
        let mut entry = cell.lock();
        entry.response = shapes.object(Some("queued"), None);
        entry.events = stream.then(Vec::new);
    }
    let kept = Arc::clone(&cell);
    shapes.keep(Box::new(move |last| {
        {
            let mut entry = kept.lock();
            if entry.status() != "cancelled" {
                entry.response = last;
            }
        }
        kept.notify();
    }));
    store.put(&id, Arc::clone(&cell));
    let run = Arc::clone(&cell);
    let handle = tokio::spawn(async move {
        {
            let mut entry = run.lock();
            if entry.status() == "queued" {
                entry.set_status("in_progress");
            }
        }
        let response = job.respond(&state, shapes).await;
        let message = sink(&run, response).await;
        run.lock().failed(&message);
        run.notify();
    });
    cell.lock().task = Some(handle.abort_handle());
    if stream {
        events_of(cell, None)
    } else {
        let response = cell.lock().response.clone();
        json_response(&response)
    }
}

/// Reads a background run's response: its stream's events into the entry; the failure's
/// message (from the error body or event) for a run that ends without its response.
async fn sink(cell: &Cell, response: Response) -> String {
    let ok = response.status() == StatusCode::OK;
    let mut body = response.into_body().into_data_stream();
    let mut buffer: Vec<u8> = Vec::new();
    let mut error: Vec<u8> = Vec::new();
    while let Some(Ok(chunk)) = body.next().await {
        if !ok {
            error.extend_from_slice(&chunk);
            continue;
        }
        buffer.extend_from_slice(&chunk);
        while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buffer.drain(..end + 2).collect();
            if !event.starts_with(b"event: ") {
                continue; // a keep-alive comment
            }
            if event.starts_with(b"event: error\n") {
                error = event
                    .splitn(2, |&b| b == b'\n')
                    .nth(1)
                    .unwrap_or(&[])
                    .to_vec();
                error = error.strip_prefix(b"data: ").unwrap_or(&error).to_vec();
            }
            if let Some(events) = cell.lock().events.as_mut() {
                events.push(Bytes::from(event));
            }
            cell.notify();
        }
    }
    let data: Value = serde_json::from_slice(&error).unwrap_or(Value::Null);
    let inner = data.get("error").unwrap_or(&data);
    inner
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the background response ended without a result")
        .to_owned()
}
