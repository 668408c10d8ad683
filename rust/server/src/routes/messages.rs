//! `POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API as
//! a translation at the edge of the chat pipeline. The body becomes the equivalent chat
//! request ([`request`]), which the chat prompt builder renders; the one chat choice's
//! deltas become content blocks and Messages events ([`events`]). Errors are in
//! Anthropic's shape.

mod blocks;
pub mod events;
mod json;
pub mod request;
mod wire;
