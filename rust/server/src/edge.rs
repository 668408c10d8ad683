//! The HTTP edge: what every request meets before and after its endpoint. The one
//! error type ([`error::ApiError`], where engine and text errors become a status),
//! the API key ([`auth`]), admission under `--max-concurrent-requests` ([`admission`]),
//! the bounded queue in front of the engine ([`queue`]), body limits ([`body`]),
//! Prometheus counters ([`metrics`], with vLLM's names in [`vllm_metrics`]; every
//! family's type, help and buckets from [`metric_contract`]), OpenTelemetry traces
//! ([`trace`]), the listener ([`listener`]), and the browser-facing [`middleware`]: CORS
//! ([`cors`]) and request ids ([`request_id`]).

pub mod admission;
pub mod auth;
pub mod body;
pub mod cors;
pub mod error;
pub mod listener;
pub mod metric_contract;
pub mod metrics;
pub mod middleware;
pub mod queue;
pub mod request_id;
pub mod trace;
pub mod vllm_metrics;
