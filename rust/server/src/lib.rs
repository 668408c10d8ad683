//! `vrs-server`: the OpenAI-compatible HTTP server of vrs-rs, in layers (each module
//! uses only those listed before it):
//!
//! - [`edge`]: the HTTP edge (errors → status, auth, admission, body limits, metrics);
//! - [`logprobs`]: log-probabilities in the OpenAI shapes;
//! - [`openai`]: the request and response bodies;
//! - [`parsers`]: tool-call and reasoning parsers;
//! - [`text`]: the model's tokenizer and chat template;
//! - [`validate`]: the request gate (body → checked prompt and settings);
//! - [`output`]: the output pipeline (detokenize, stop strings, choices, SSE);
//! - [`state`]: what handlers share;
//! - [`dispatch`]: an accepted request → the engine → the response;
//! - [`routes`]: the route tables and one module per endpoint;
//! - [`args`] and [`lifecycle`]: the settings, start-up order and shutdown of `serve`,
//!   `frontend` and `render`.
//!
//! The engine is reached through `vrs-engine-client`; text work is `vrs-text`.

pub mod args;
pub mod dispatch;
pub mod edge;
pub mod lifecycle;
pub mod logprobs;
pub mod openai;
pub mod output;
pub mod parsers;
pub mod routes;
pub mod state;
#[cfg(test)]
mod testutil;
pub mod text;
pub mod validate;
