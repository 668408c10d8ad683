//! Reading an OpenAI streaming response: server-sent event framing (frames may split
//! anywhere across network reads) and the few fields the benchmark needs from a chunk.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::Deserialize;

/// Incremental SSE parser: feed it bytes as they arrive, get each event's `data`.
#[derive(Debug, Default)]
pub struct SseParser {
    /// An unfinished line carried over from the previous read.
    partial: Vec<u8>,
    /// The data of the event being assembled (lines joined by `\n`).
    data: Vec<u8>,
    has_data: bool,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Consumes `bytes`, calling `on_event` with the data of every event completed by them.
    pub fn feed(&mut self, bytes: &[u8], on_event: &mut impl FnMut(&[u8])) {
        let mut rest = bytes;
        if !self.partial.is_empty() {
            let Some(end) = memchr::memchr(b'\n', rest) else {
                self.partial.extend_from_slice(rest);
                return;
            };
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&rest[..end]);
            self.line(&line, on_event);
            line.clear();
            self.partial = line;
            rest = &rest[end + 1..];
        }
        while let Some(end) = memchr::memchr(b'\n', rest) {
            self.line(&rest[..end], on_event);
            rest = &rest[end + 1..];
        }
        self.partial.extend_from_slice(rest);
    }

    /// End of stream: an event left without its closing blank line is still delivered.
    pub fn finish(&mut self, on_event: &mut impl FnMut(&[u8])) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line, on_event);
        }
        self.line(b"", on_event);
    }

    fn line(&mut self, line: &[u8], on_event: &mut impl FnMut(&[u8])) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.has_data {
                on_event(&self.data);
                self.data.clear();
                self.has_data = false;
            }
            return;
        }
        if line[0] == b':' {
            return; // a comment (keep-alive ping)
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &b""[..]),
        };
        if field == b"data" {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
    }
}

/// What one `data:` payload means to the benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// `[DONE]`: the stream is over.
    Done,
    /// A chunk. `content` is true when it carries generated output (text, content,
    /// reasoning or tool calls); role-only and empty finish chunks are not content.
    /// `choices` is true when it has any choice at all (the usage chunk has none).
    Chunk {
        content: bool,
        choices: bool,
        completion_tokens: Option<u64>,
    },
    /// The server reported an error inside the stream.
    Error(String),
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    completion_tokens: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorBody<'a> {
    Object {
        #[serde(default, borrow)]
        message: Option<Cow<'a, str>>,
    },
    Text(#[serde(borrow)] Cow<'a, str>),
}

fn non_empty(text: &Option<Cow<'_, str>>) -> bool {
    text.as_deref().is_some_and(|t| !t.is_empty())
}

/// Classifies one event's data; `Err` when it is not JSON an OpenAI server would send.
pub fn parse_payload(data: &[u8]) -> Result<Payload, String> {
    if data == b"[DONE]" {
        return Ok(Payload::Done);
    }
    let chunk: Chunk = serde_json::from_slice(data).map_err(|e| {
        let shown = String::from_utf8_lossy(&data[..data.len().min(120)]).into_owned();
        format!("unreadable stream chunk ({e}): {shown}")
    })?;
    if let Some(error) = chunk.error {
        let message = match error {
            ErrorBody::Object { message } => message.map(Cow::into_owned),
            ErrorBody::Text(text) => Some(text.into_owned()),
        };
        return Ok(Payload::Error(
            message.unwrap_or_else(|| "error event in stream".into()),
        ));
    }
    let content = chunk.choices.first().is_some_and(|choice| {
        non_empty(&choice.text)
            || choice.delta.as_ref().is_some_and(|d| {
                non_empty(&d.content)
                    || non_empty(&d.reasoning_content)
                    || non_empty(&d.reasoning)
                    || d.tool_calls.is_some()
            })
    });
    Ok(Payload::Chunk {
        content,
        choices: !chunk.choices.is_empty(),
        completion_tokens: chunk.usage.and_then(|u| u.completion_tokens),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events_of(pieces: &[&[u8]]) -> Vec<String> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        let mut push = |d: &[u8]| out.push(String::from_utf8(d.to_vec()).unwrap());
        for piece in pieces {
            parser.feed(piece, &mut push);
        }
        parser.finish(&mut push);
        out
    }

    #[test]
    fn events_split_at_every_byte_boundary() {
        let stream: &[u8] =
            b"data: {\"a\":1}\n\n: ping\n\ndata: {\"b\":2}\r\n\r\nevent: x\ndata: [DONE]\n\n";
        let whole = events_of(&[stream]);
        assert_eq!(whole, vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        for cut in 0..stream.len() {
            let (a, b) = stream.split_at(cut);
            assert_eq!(events_of(&[a, b]), whole, "split at {cut}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(events_of(&bytes), whole);
    }

    #[test]
    fn multi_line_data_and_missing_final_blank_line() {
        assert_eq!(
            events_of(&[b"data: a\ndata:b\n\ndata: tail"]),
            vec!["a\nb", "tail"]
        );
        assert!(events_of(&[b"id: 1\nretry: 5\n\n"]).is_empty());
    }

    #[test]
    fn payloads_are_classified() {
        let chunk = |content, completion_tokens: Option<u64>| {
            Ok(Payload::Chunk {
                content,
                choices: completion_tokens.is_none(),
                completion_tokens,
            })
        };
        assert_eq!(parse_payload(b"[DONE]"), Ok(Payload::Done));
        let text = br#"{"id":"c","choices":[{"index":0,"text":"hi","finish_reason":null}]}"#;
        assert_eq!(parse_payload(text), chunk(true, None));
        let empty = br#"{"choices":[{"index":0,"text":"","finish_reason":"length"}]}"#;
        assert_eq!(parse_payload(empty), chunk(false, None));
        let role = br#"{"choices":[{"delta":{"role":"assistant","content":""}}]}"#;
        assert_eq!(parse_payload(role), chunk(false, None));
        let delta = br#"{"choices":[{"delta":{"content":"caf\u00e9 \"x\""}}]}"#;
        assert_eq!(parse_payload(delta), chunk(true, None));
        let think = br#"{"choices":[{"delta":{"reasoning_content":"hm"}}]}"#;
        assert_eq!(parse_payload(think), chunk(true, None));
        let tools = br#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#;
        assert_eq!(parse_payload(tools), chunk(true, None));
        let usage = br#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7}}"#;
        assert_eq!(parse_payload(usage), chunk(false, Some(7)));
        let null_usage = br#"{"choices":[{"text":"a"}],"usage":null}"#;
        assert_eq!(parse_payload(null_usage), chunk(true, None));
        let error = br#"{"error":{"message":"engine died","code":503}}"#;
        assert_eq!(
            parse_payload(error),
            Ok(Payload::Error("engine died".into()))
        );
        assert!(parse_payload(b"not json").unwrap_err().contains("not json"));
    }
}
