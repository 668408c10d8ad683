//! Anthropic Messages stream events (`{"type": "message_start" | "content_block_delta" |
//! …}`): `text_delta`, `thinking_delta` and `input_json_delta` are output;
//! `message_delta` carries the usage, `message_stop` ends the stream, `error` fails it.

use std::borrow::Cow;

use serde::Deserialize;

use super::{non_empty, unreadable, Payload};

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<ErrorObject<'a>>,
}

/// `content_block_delta`'s delta (`message_delta`'s has none of these fields).
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
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

pub(super) fn parse(data: &[u8]) -> Result<Payload, String> {
    let event: Event = serde_json::from_slice(data).map_err(|e| unreadable(data, e))?;
    let chunk = |content, choices, completion_tokens| {
        Ok(Payload::Chunk {
            content,
            choices,
            completion_tokens,
        })
    };
    match event.kind.as_ref() {
        "content_block_delta" => {
            let content = event.delta.is_some_and(|d| {
                non_empty(&d.text) || non_empty(&d.thinking) || non_empty(&d.partial_json)
            });
            chunk(content, true, None)
        }
        "content_block_start" | "content_block_stop" => chunk(false, true, None),
        // message_start's usage (output_tokens 0) is not the count: message_delta's is.
        "message_delta" => chunk(false, true, event.usage.and_then(|u| u.output_tokens)),
        "message_stop" => Ok(Payload::Done),
        "error" => Ok(Payload::Error(
            event
                .error
                .and_then(|e| e.message)
                .map_or_else(|| "error event in stream".into(), Cow::into_owned),
        )),
        // message_start, ping, and events added later (Anthropic's versioning rule).
        _ => chunk(false, false, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sse::SseParser;

    fn chunk(content: bool, choices: bool, tokens: Option<u64>) -> Result<Payload, String> {
        Ok(Payload::Chunk {
            content,
            choices,
            completion_tokens: tokens,
        })
    }

    /// A stream as Anthropic's docs and the spec write it: thinking, text, a tool call.
    #[test]
    fn a_whole_stream_is_classified() {
        let stream = concat!(
            "event: message_start\n",
            r#"data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":0}}}"#,
            "\n\nevent: ping\n",
            r#"data: {"type":"ping"}"#,
            "\n\nevent: content_block_start\n",
            r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#,
            "\n\nevent: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hm"}}"#,
            "\n\nevent: content_block_stop\n",
            r#"data: {"type":"content_block_stop","index":0}"#,
            "\n\nevent: content_block_start\n",
            r#"data: {"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
            "\n\nevent: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":""}}"#,
            "\n\nevent: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"caf\u00e9"}}"#,
            "\n\nevent: content_block_delta\n",
            r#"data: {"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}"#,
            "\n\nevent: message_delta\n",
            r#"data: {"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":12}}"#,
            "\n\nevent: message_stop\n",
            r#"data: {"type":"message_stop"}"#,
            "\n\n",
        );
        let mut seen = Vec::new();
        let mut parser = SseParser::new();
        parser.feed(stream.as_bytes(), &mut |data| seen.push(parse(data)));
        parser.finish(&mut |data| seen.push(parse(data)));
        assert_eq!(
            seen,
            vec![
                chunk(false, false, None),
                chunk(false, false, None),
                chunk(false, true, None),
                chunk(true, true, None),
                chunk(false, true, None),
                chunk(false, true, None),
                chunk(false, true, None),
                chunk(true, true, None),
                chunk(true, true, None),
                chunk(false, true, Some(12)),
                Ok(Payload::Done),
            ]
        );
    }

    #[test]
    fn failures_and_other_events() {
        let error =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(parse(error), Ok(Payload::Error("Overloaded".into())));
        let bare = br#"{"type":"error"}"#;
        assert_eq!(
            parse(bare),
            Ok(Payload::Error("error event in stream".into()))
        );
        let signature = br#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"abc"}}"#;
        assert_eq!(parse(signature), chunk(false, true, None));
        let start_usage = br#"{"type":"message_start","message":{"usage":{"output_tokens":0}}}"#;
        assert_eq!(parse(start_usage), chunk(false, false, None));
        assert!(parse(b"[DONE]").unwrap_err().contains("unreadable"));
    }
}
