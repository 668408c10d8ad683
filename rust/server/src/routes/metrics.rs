//! `GET /metrics`: the Prometheus text of [`crate::edge::metrics`], with the engines'
//! latest stats and the requests routed to each, then the `vllm:*` series of
//! [`crate::edge::vllm_metrics`]. Mirrors `server/routes/metrics.py`.

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};

use crate::edge::metrics::{routed_metrics, CONTENT_TYPE};
use crate::state::SharedState;

pub async fn metrics(State(state): State<SharedState>) -> Response {
    let engines = state.client.engine_stats();
    let mut body = state.metrics.render(&engines, state.admission.active());
    let routed: Vec<(u32, usize)> = state
        .client
        .engine_loads()
        .into_iter()
        .map(|(index, _, routed)| (index, routed))
        .collect();
    routed_metrics(&mut body, &routed);
    state
        .metrics
        .vllm
        .render(&mut body, &state.model_name, state.max_model_len, &engines);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}
