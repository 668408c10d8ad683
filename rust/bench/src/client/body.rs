//! The request body of one prompt, for each backend's API.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::args::Backend;

/// The request body for one prompt. Generation (vLLM's bench): greedy, streamed, usage
/// requested. Embeddings (vLLM's `openai-embeddings`): the prompt as `input`, with
/// `truncate_prompt_tokens: -1` (a prompt longer than the model takes is cut to its
/// length rather than refused); `max_tokens` does not apply.
pub fn request_body(
    backend: Backend,
    model: &str,
    prompt: &str,
    max_tokens: usize,
    ignore_eos: bool,
) -> Bytes {
    let stream_options = json!({"include_usage": true});
    let mut body = match backend {
        Backend::OpenaiCompletions => json!({
            "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "stream": true, "stream_options": stream_options,
        }),
        Backend::OpenaiChat => json!({
            "model": model, "messages": [{"role": "user", "content": prompt}],
            "max_completion_tokens": max_tokens, "temperature": 0.0, "stream": true,
            "stream_options": stream_options,
        }),
        // The usage comes with response.completed; nothing is stored server-side.
        Backend::OpenaiResponses => json!({
            "model": model, "input": prompt, "max_output_tokens": max_tokens,
            "temperature": 0.0, "stream": true, "store": false,
        }),
        // max_tokens is required there; the usage comes with message_delta.
        Backend::AnthropicMessages => json!({
            "model": model, "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}], "temperature": 0.0,
            "stream": true,
        }),
        Backend::OpenaiEmbeddings => json!({
            "model": model, "input": prompt, "truncate_prompt_tokens": -1,
        }),
    };
    if let (true, Value::Object(map)) = (ignore_eos, &mut body) {
        map.insert("ignore_eos".into(), Value::Bool(true));
    }
    Bytes::from(body.to_string())
}

/// A chat completions request of a conversation's turn: `messages` is the history (the
/// system message, the earlier turns with the server's own answers) and this turn's user
/// message; greedy, streamed, usage requested.
pub fn chat_body(model: &str, messages: &[Value], max_tokens: usize, ignore_eos: bool) -> Bytes {
    let mut body = json!({
        "model": model, "messages": messages, "max_completion_tokens": max_tokens,
        "temperature": 0.0, "stream": true, "stream_options": {"include_usage": true},
    });
    if let (true, Value::Object(map)) = (ignore_eos, &mut body) {
        map.insert("ignore_eos".into(), Value::Bool(true));
    }
    Bytes::from(body.to_string())
}
