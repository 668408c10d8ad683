"""The output pipeline of a generation request: engine outputs -> detokenizer and stop
strings (``generation``) -> each choice's deltas (``choice``) -> the response, streamed
(``sse``, ``content_chunk``) or whole (``response``); batches in ``batch``.
Rust: rust/server/src/output.rs."""
