//! The route tables, in one place: the serving API ([`router`]) and the engine-less
//! render service ([`render_router`]), and the middleware every serving request passes
//! ([`guard`]; CORS and request ids wrap both services: [`crate::edge::middleware`]). Each endpoint is a module below; the HTTP edge (API key, metrics, body
//! limit, error bodies) is [`crate::edge`].

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{Method, StatusCode, Uri};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::edge::auth;
use crate::edge::body::MAX_BODY_BYTES;
use crate::edge::error::{ApiError, Dialect};
use crate::state::{RenderState, SharedState};

pub mod chat_batch;
pub mod chat_completions;
pub mod completions;
pub mod health;
pub mod invocations;
pub mod messages;
pub mod metrics;
pub mod models;
pub mod pooling;
pub mod render;
pub mod responses;
pub mod tokenize;

/// The serving API: generation, pooling, models, health, metrics, load, version, tokenizer, and
/// vLLM's SageMaker pair (`/ping`, `/invocations`); `/tokenizer_info` with
/// `--enable-tokenizer-info-endpoint` only, as in vLLM.
pub fn router(state: SharedState) -> Router {
    let limit = state.options.max_request_body;
    let middleware = state.options.middleware.clone();
    let mut routes = Router::new();
    if state.options.tokenizer_info.is_some() {
        routes = routes.route("/tokenizer_info", get(tokenize::tokenizer_info));
    }
    let routes = routes
        .route("/v1/chat/completions", post(chat_completions::handle))
        .route("/v1/chat/completions/batch", post(chat_batch::handle))
        .route("/v1/completions", post(completions::handle))
        .route("/v1/messages", post(messages::create))
        .route("/v1/messages/count_tokens", post(messages::count_tokens))
        .merge(responses_routes(&state))
        .merge(pooling_routes())
        .route("/v1/models", get(models::models))
        .route("/health", get(health::health))
        .route("/metrics", get(metrics::metrics))
        .route("/load", get(health::load))
        .route("/version", get(health::version))
        .route("/ping", get(health::health).post(health::health))
        .route("/invocations", post(invocations::handle))
        .route("/tokenize", post(tokenize::tokenize))
        .route("/detokenize", post(tokenize::detokenize))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(Arc::clone(&state), guard))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state);
    middleware.apply(routes)
}

/// The pooling routes ([`pooling`]): embeddings, pooling, classify, score, rerank.
fn pooling_routes() -> Router<SharedState> {
    Router::new()
        .route("/v1/embeddings", post(pooling::embeddings::handle))
        .route("/pooling", post(pooling::handle))
        .route("/classify", post(pooling::classify::handle))
        .route("/score", post(pooling::score::handle))
        .route("/v1/score", post(pooling::score::handle))
        .route("/rerank", post(pooling::rerank::handle))
        .route("/v1/rerank", post(pooling::rerank::handle))
        .route("/v2/rerank", post(pooling::rerank::handle))
}

/// The Responses API's routes, over the store ([`responses::store`]).
fn responses_routes(state: &SharedState) -> Router<SharedState> {
    use responses::stored;
    let store = Arc::new(responses::store::ResponseStore::new(
        state.options.responses_store,
    ));
    Router::new()
        .route("/v1/responses", post(responses::handle))
        .route(
            "/v1/responses/{id}",
            get(stored::retrieve).delete(stored::delete),
        )
        .route("/v1/responses/{id}/cancel", post(stored::cancel))
        .route("/v1/responses/{id}/input_items", get(stored::input_items))
        .with_state((Arc::clone(state), store))
}

/// The render service: template + tokenization only, no engine.
pub fn render_router(state: Arc<RenderState>) -> Router {
    let middleware = state.middleware.clone();
    let routes = Router::new()
        .route("/v1/chat/completions/render", post(render::chat))
        .route("/v1/completions/render", post(render::completion))
        .route("/v1/messages/render", post(render::messages))
        .route("/v1/responses/render", post(responses::render))
        .route("/v1/models", get(models::render_models))
        .route("/health", get(|| async { StatusCode::OK }))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state);
    middleware.apply(routes)
}

/// Every request: the API key on `/v1/*` and `/invocations` (401, in the path's error
/// dialect; its body read first, within the body limit, so that the connection stays
/// usable), then the route; counted in the metrics by endpoint and status.
pub async fn guard(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_owned();
    let response = match &state.options.api_key {
        Some(key) if auth::protected(&path) && !auth::authorized(request.headers(), key) => {
            let limit = state.options.max_request_body;
            let _ = axum::body::to_bytes(request.into_body(), limit).await;
            ApiError::Unauthorized.respond(Dialect::for_path(&path))
        }
        _ => next.run(request).await,
    };
    state.metrics.request(&path, response.status().as_u16());
    response
}

/// The 404 of an unknown route. Its body is read (within the body limit; a larger one
/// closes the connection: `crate::edge::listener`) and dropped, so that a kept-alive
/// connection stays usable.
pub async fn not_found(uri: Uri, body: Result<Bytes, BytesRejection>) -> Response {
    drop(body);
    let path = uri.path();
    ApiError::RouteNotFound(path.to_owned()).respond(Dialect::for_path(path))
}

/// The 405 of a known route, its body read and dropped as for [`not_found`].
pub async fn method_not_allowed(
    method: Method,
    uri: Uri,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    drop(body);
    let path = uri.path();
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: path.to_owned(),
    }
    .respond(Dialect::for_path(path))
}

#[cfg(test)]
mod tests;
