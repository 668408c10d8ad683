//! `GET /health` and vLLM's SageMaker `GET|POST /ping` (200, or 503 once the engine is
//! gone), `GET /load` (generation requests in
//! flight) and `GET /version`.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::edge::error::ApiError;
use crate::state::SharedState;

pub async fn health(State(state): State<SharedState>) -> Response {
    match state.client.dead_reason() {
        None => StatusCode::OK.into_response(),
        Some(reason) => ApiError::EngineDead(reason.to_string()).into_response(),
    }
}

pub async fn load(State(state): State<SharedState>) -> Response {
    Json(serde_json::json!({"server_load": state.admission.active()})).into_response()
}

pub async fn version() -> Response {
    Json(serde_json::json!({"version": env!("CARGO_PKG_VERSION")})).into_response()
}
