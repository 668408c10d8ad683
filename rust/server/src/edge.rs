//! The HTTP edge: what every request meets before and after its endpoint. The one
//! error type ([`error::ApiError`], where engine and text errors become a status),
//! the API key ([`auth`]), admission under `--max-concurrent-requests` ([`admission`]),
//! the bounded queue in front of the engine ([`queue`]),
//! body limits ([`body`]), Prometheus counters ([`metrics`], with vLLM's names in
//! [`vllm_metrics`]) and the listener
//! ([`listener`]).

pub mod admission;
pub mod auth;
pub mod body;
pub mod error;
pub mod listener;
pub mod metrics;
pub mod queue;
pub mod vllm_metrics;
