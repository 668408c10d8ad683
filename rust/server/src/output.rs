//! The output pipeline of a generation request: engine outputs → incremental
//! detokenizer and stop strings ([`generation`]: [`piece`]s, its counts and times in [`tally`],
//! reported to the request's [`observer`]) → each choice's deltas and final form
//! ([`choice`], with [`crate::logprobs`]) → the response, streamed as SSE ([`sse`]; a chat
//! token that brings only text from a pre-rendered head, [`content_chunk`]) or whole
//! ([`response`]). A batched completions request fans out into prompts × n choices
//! ([`batch`]); a beam search ([`beam_search`]) runs its steps first, then its choices
//! replay its beams through the same pipeline.

pub mod batch;
pub mod beam_search;
pub mod choice;
pub mod content_chunk;
pub mod generation;
pub mod observer;
pub mod piece;
pub mod reasoning_tokens;
pub mod response;
pub mod sse;
pub mod tally;
