//! The Responses API's wire shapes: the typed event framing (`event: TYPE` with
//! `{"type", "sequence_number", …}`) and the borrowed structs the events and the response
//! object serialize from (no `serde_json::Value` trees on the hot path).

use serde::Serialize;
use serde_json::Value;

use crate::logprobs::TokenLogprob;
use crate::openai::Usage;

/// Appends `event: kind` and its data: `{"type": kind, "sequence_number": sequence`
/// then the keys of `fields` (which serializes as a JSON object).
pub(super) fn write_event<F: Serialize>(buf: &mut Vec<u8>, kind: &str, sequence: u64, fields: &F) {
    let mut data = Vec::with_capacity(256);
    // Our fields hold only strings, numbers and JSON values: this cannot fail, and if it
    // ever did the event would carry no fields rather than cut the stream.
    if serde_json::to_writer(&mut data, fields).is_err() || !data.starts_with(b"{") {
        data = b"{}".to_vec();
    }
    buf.extend_from_slice(b"event: ");
    buf.extend_from_slice(kind.as_bytes());
    buf.extend_from_slice(b"\ndata: {\"type\":");
    if serde_json::to_writer(&mut *buf, kind).is_err() {
        buf.extend_from_slice(b"null");
    }
    buf.extend_from_slice(b",\"sequence_number\":");
    buf.extend_from_slice(sequence.to_string().as_bytes());
    if data.len() > 2 {
        buf.push(b',');
    }
    buf.extend_from_slice(&data[1..]);
    buf.extend_from_slice(b"\n\n");
}

#[derive(Serialize)]
pub(super) struct WithResponse<R: Serialize> {
    pub(super) response: R,
}

/// `response.output_text.delta` (with `logprobs`) and `response.reasoning_text.delta`.
#[derive(Serialize)]
pub(super) struct TextDelta<'a> {
    pub(super) item_id: &'a str,
    pub(super) output_index: usize,
    pub(super) content_index: u32,
    pub(super) delta: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) logprobs: Option<Streamed<'a>>,
}

/// Logprobs as the text delta and done events carry them: `{token, logprob, top_logprobs:
/// [{token, logprob}]}` (no `bytes`, unlike the output item's).
pub(super) struct Streamed<'a>(pub(super) &'a [TokenLogprob]);

#[derive(Serialize)]
struct StreamedLogprob<'a> {
    token: &'a str,
    logprob: f64,
    top_logprobs: Vec<StreamedTop<'a>>,
}

#[derive(Serialize)]
struct StreamedTop<'a> {
    token: &'a str,
    logprob: f64,
}

impl Serialize for Streamed<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|lp| {
            StreamedLogprob {
                token: &lp.token,
                logprob: lp.logprob,
                top_logprobs: lp
                    .top_logprobs
                    .iter()
                    .map(|top| StreamedTop {
                        token: &top.token,
                        logprob: top.logprob,
                    })
                    .collect(),
            }
        }))
    }
}

#[derive(Serialize)]
pub(super) struct ArgumentsDelta<'a> {
    pub(super) item_id: &'a str,
    pub(super) output_index: usize,
    pub(super) delta: &'a str,
}

#[derive(Serialize)]
pub(super) struct Incomplete {
    pub(super) reason: &'static str,
}

#[derive(Serialize)]
pub(super) struct ResponseUsage {
    pub(super) input_tokens: u32,
    pub(super) input_tokens_details: InputTokensDetails,
    pub(super) output_tokens: u32,
    pub(super) output_tokens_details: ReasoningTokens,
    pub(super) total_tokens: u32,
}

/// `cached_tokens`: the prompt tokens found in the engine's prefix cache;
/// `cache_write_tokens` always 0 (vLLM's: the prefix cache's writes are not billed).
#[derive(Serialize)]
pub(super) struct InputTokensDetails {
    pub(super) cached_tokens: u32,
    pub(super) cache_write_tokens: u32,
}

#[derive(Serialize)]
pub(super) struct ReasoningTokens {
    pub(super) reasoning_tokens: u32,
}

impl From<Usage> for ResponseUsage {
    fn from(u: Usage) -> Self {
        Self {
            input_tokens: u.prompt_tokens,
            input_tokens_details: InputTokensDetails {
                cached_tokens: u.prompt_tokens_details.cached_tokens,
                cache_write_tokens: 0,
            },
            output_tokens: u.completion_tokens,
            output_tokens_details: ReasoningTokens {
                reasoning_tokens: u.reasoning_tokens(),
            },
            total_tokens: u.total_tokens,
        }
    }
}

/// The response object, borrowing the request's echo (key order: the API's).
#[derive(Serialize)]
pub(super) struct ResponseObject<'a> {
    pub(super) id: &'a str,
    pub(super) object: &'static str,
    pub(super) created_at: u64,
    pub(super) status: &'static str,
    pub(super) error: Option<()>,
    pub(super) incomplete_details: Option<Incomplete>,
    pub(super) instructions: &'a Value,
    pub(super) max_output_tokens: &'a Value,
    pub(super) model: &'a str,
    pub(super) output: Vec<Value>,
    pub(super) parallel_tool_calls: &'a Value,
    pub(super) previous_response_id: Option<&'a str>,
    pub(super) reasoning: &'a Value,
    pub(super) store: bool,
    pub(super) temperature: &'a Value,
    pub(super) text: &'a Value,
    pub(super) tool_choice: &'a Value,
    pub(super) tools: &'a Value,
    pub(super) top_logprobs: &'a Value,
    pub(super) top_p: &'a Value,
    pub(super) truncation: &'static str,
    pub(super) usage: Option<ResponseUsage>,
    pub(super) user: &'a Value,
    pub(super) metadata: &'a Value,
    /// vLLM's `enable_response_messages` (the final object only): the prompt and the
    /// output as the model saw and wrote them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) input_messages: Option<[RawMessage<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) output_messages: Option<Vec<RawMessage<'a>>>,
}

/// One of vLLM's raw messages: text and token ids.
#[derive(Serialize)]
pub(super) struct RawMessage<'a> {
    pub(super) message: &'a str,
    pub(super) tokens: &'a [u32],
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
}

impl<'a> RawMessage<'a> {
    pub(super) fn new(message: &'a str, tokens: &'a [u32]) -> Self {
        Self {
            message,
            tokens,
            kind: "raw_message_tokens",
        }
    }
}
