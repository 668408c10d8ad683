//! The HTTP edge: what every request meets before and after its endpoint. The one
//! error type ([`error::ApiError`], where engine and text errors become a status),
//! the API key ([`auth`]), admission under `--max-concurrent-requests` ([`admission`]),
//! body limits ([`body`]), Prometheus counters ([`metrics`], with vLLM's names in
//! [`vllm_metrics`]), OpenTelemetry traces ([`trace`]) and the listener
//! ([`listener`]).

pub mod admission;
pub mod auth;
pub mod body;
pub mod error;
pub mod listener;
pub mod metrics;
pub mod trace;
pub mod vllm_metrics;
