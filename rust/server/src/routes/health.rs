//! `GET /health` and vLLM's SageMaker `GET|POST /ping` (200, or 503 once the engine is
//! gone), `GET /load` (generation requests in flight, and each engine's tensor-parallel
//! ranks' memory from its READY) and `GET /version`. Mirrors `server/routes/health.py`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use vrs_wire::Ready;

use crate::edge::error::ApiError;
use crate::state::SharedState;

pub async fn health(State(state): State<SharedState>) -> Response {
    match state.client.dead_reason() {
        None => StatusCode::OK.into_response(),
        Some(reason) => ApiError::EngineDead(reason.to_string()).into_response(),
    }
}

pub async fn load(State(state): State<SharedState>) -> Response {
    Json(load_body(state.admission.active(), &state.readies)).into_response()
}

/// `/load`'s body: vLLM's `server_load`, and each engine's ranks (by engine index, each
/// rank's fields as READY gives them; an engine that reports none: `[]`).
fn load_body(server_load: usize, readies: &[Ready]) -> Value {
    let mut readies: Vec<&Ready> = readies.iter().collect();
    readies.sort_by_key(|ready| ready.engine_index);
    let engines: Vec<Value> = readies
        .into_iter()
        .map(|ready| json!({"engine_index": ready.engine_index, "ranks": ready.ranks}))
        .collect();
    json!({"server_load": server_load, "engines": engines})
}

pub async fn version() -> Response {
    Json(serde_json::json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}
