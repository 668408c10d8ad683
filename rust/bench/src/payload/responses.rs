//! The OpenAI Responses API's typed stream events (`{"type": "response.…", …}`): text,
//! reasoning and function-call argument deltas are output; `response.completed` /
//! `response.incomplete` end the stream with the usage; `error` and `response.failed`
//! are failures.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

use super::{unreadable, Payload};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    /// The `error` event's message.
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    response: Option<Response<'a>>,
}

/// A delta is a string in every event that carries one; anything else is no output.
#[derive(Deserialize)]
#[serde(untagged)]
enum Delta<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Other(IgnoredAny),
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<ErrorObject<'a>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorObject<'a> {
    #[serde(default, borrow)]
    message: Option<Cow<'a, str>>,
}

/// Events whose delta is generated output: the answer's text, reasoning (as chat's
/// `reasoning_content` counts) and tool-call arguments (as chat's `tool_calls`).
const OUTPUT_DELTAS: [&str; 4] = [
    "response.output_text.delta",
    "response.reasoning_text.delta",
    "response.reasoning_summary_text.delta",
    "response.function_call_arguments.delta",
];

/// Events before any output: the response object announced.
const PRELUDE: [&str; 3] = [
    "response.created",
    "response.in_progress",
    "response.queued",
];

pub(super) fn parse(data: &[u8]) -> Result<Payload, String> {
    let event: Event = serde_json::from_slice(data).map_err(|e| unreadable(data, e))?;
    let kind = event.kind.as_ref();
    match kind {
        "response.completed" | "response.incomplete" => Ok(Payload::Final {
            completion_tokens: event
                .response
                .and_then(|r| r.usage)
                .and_then(|u| u.output_tokens),
        }),
        "error" => Ok(Payload::Error(
            event
                .message
                .map_or_else(|| "error event in stream".into(), Cow::into_owned),
        )),
        "response.failed" => {
            let message = event
                .response
                .and_then(|r| r.error)
                .and_then(|e| e.message)
                .map_or_else(|| "response.failed".into(), Cow::into_owned);
            Ok(Payload::Error(message))
        }
        _ => {
            let content = OUTPUT_DELTAS.contains(&kind)
                && matches!(&event.delta, Some(Delta::Text(t)) if !t.is_empty());
            Ok(Payload::Chunk {
                content,
                choices: !PRELUDE.contains(&kind),
                completion_tokens: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    fn chunk(content: bool, choices: bool) -> Result<Payload, String> {
        Ok(Payload::Chunk {
            content,
            choices,
            completion_tokens: None,
        })
    }

    /// A stream as the spec writes it (reasoning item, message item, function call),
    /// framed by the SSE parser and classified event by event.
    #[test]
    fn a_whole_stream_is_classified() {
        let stream = concat!(
            "event: response.created\n",
            r#"data: {"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","status":"in_progress","error":null,"output":[],"usage":null}}"#,
            "\n\nevent: response.in_progress\n",
            r#"data: {"type":"response.in_progress","sequence_number":1,"response":{"id":"resp_1","status":"in_progress","usage":null}}"#,
            "\n\nevent: response.output_item.added\n",
            r#"data: {"type":"response.output_item.added","sequence_number":2,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[],"content":[]}}"#,
            "\n\nevent: response.reasoning_text.delta\n",
            r#"data: {"type":"response.reasoning_text.delta","sequence_number":3,"item_id":"rs_1","output_index":0,"content_index":0,"delta":"hm"}"#,
            "\n\nevent: response.output_text.delta\n",
            r#"data: {"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"","logprobs":[]}"#,
            "\n\nevent: response.output_text.delta\n",
            r#"data: {"type":"response.output_text.delta","sequence_number":5,"item_id":"msg_1","output_index":1,"content_index":0,"delta":"caf\u00e9 \"x\"","logprobs":[]}"#,
            "\n\nevent: response.output_text.done\n",
            r#"data: {"type":"response.output_text.done","sequence_number":6,"item_id":"msg_1","output_index":1,"content_index":0,"text":"café \"x\"","logprobs":[]}"#,
            "\n\nevent: response.function_call_arguments.delta\n",
            r#"data: {"type":"response.function_call_arguments.delta","sequence_number":7,"item_id":"fc_1","output_index":2,"delta":"{\"a\":"}"#,
            "\n\nevent: response.completed\n",
            r#"data: {"type":"response.completed","sequence_number":8,"response":{"id":"resp_1","status":"completed","error":null,"usage":{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":14}}}"#,
            "\n\n",
        );
        let mut seen = Vec::new();
        let mut parser = SseParser::new();
        parser.feed(stream.as_bytes(), &mut |data| seen.push(parse(data)));
        parser.finish(&mut |data| seen.push(parse(data)));
        assert_eq!(
            seen,
            vec![
                chunk(false, false),
                chunk(false, false),
                chunk(false, true),
                chunk(true, true),
                chunk(false, true),
                chunk(true, true),
                chunk(false, true),
                chunk(true, true),
                Ok(Payload::Final {
                    completion_tokens: Some(9)
                }),
            ]
        );
    }

    #[test]
    fn endings_and_failures() {
        let incomplete = br#"{"type":"response.incomplete","sequence_number":9,"response":{"status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"usage":{"output_tokens":16}}}"#;
        assert_eq!(
            parse(incomplete),
            Ok(Payload::Final {
                completion_tokens: Some(16)
            })
        );
        let no_usage = br#"{"type":"response.completed","response":{"usage":null}}"#;
        assert_eq!(
            parse(no_usage),
            Ok(Payload::Final {
                completion_tokens: None
            })
        );
        let error = br#"{"type":"error","sequence_number":4,"code":"InternalServerError","message":"engine died","param":null}"#;
        assert_eq!(parse(error), Ok(Payload::Error("engine died".into())));
        let failed = br#"{"type":"response.failed","response":{"status":"failed","error":{"code":"server_error","message":"boom"}}}"#;
        assert_eq!(parse(failed), Ok(Payload::Error("boom".into())));
        let summary = br#"{"type":"response.reasoning_summary_text.delta","delta":"s"}"#;
        assert_eq!(parse(summary), chunk(true, true));
        // A delta that is not text, in an event this parser does not know: not output.
        let odd = br#"{"type":"response.future.delta","delta":{"x":1}}"#;
        assert_eq!(parse(odd), chunk(false, true));
        assert!(parse(b"[DONE]").unwrap_err().contains("unreadable"));
        assert!(parse(br#"{"delta":"x"}"#).unwrap_err().contains("type"));
    }
}
