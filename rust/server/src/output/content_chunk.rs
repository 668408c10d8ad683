//! The chat chunk of a token that brings only text, the common case of a stream: written
//! from the response's pre-rendered head (`data: {"id":…,"object":…,"created":…,
//! "model":…,"choices":[{"index":`), so that each token serializes only its text and
//! finish reason. Byte for byte what serde writes for the same [`ChatChunk`] (tested).

use std::io::Write;

use crate::openai::Header;

/// A response's content-only chat chunks.
pub struct ContentChunks {
    head: Vec<u8>,
}

impl ContentChunks {
    /// The chunks of the response whose chunks start with `header`.
    pub fn new(header: &Header<'_>) -> Self {
        let mut head = b"data: ".to_vec();
        // A header is strings and a number: serde cannot fail on it.
        let json = serde_json::to_vec(header).unwrap_or_else(|_| b"{}".to_vec());
        head.extend_from_slice(&json[..json.len() - 1]);
        head.extend_from_slice(b",\"choices\":[{\"index\":");
        Self { head }
    }

    /// Appends the event of choice `index` saying `content` (none when empty), with
    /// `finish` as its finish reason.
    pub fn push(&self, buf: &mut Vec<u8>, index: u32, content: &str, finish: Option<&str>) {
        buf.extend_from_slice(&self.head);
        // Writing into a Vec cannot fail.
        let _ = write!(buf, "{index}");
        if content.is_empty() {
            buf.extend_from_slice(b",\"delta\":{}");
        } else {
            buf.extend_from_slice(b",\"delta\":{\"content\":");
            string(buf, content);
            buf.push(b'}');
        }
        buf.extend_from_slice(b",\"logprobs\":null,\"finish_reason\":");
        match finish {
            Some(reason) => string(buf, reason),
            None => buf.extend_from_slice(b"null"),
        }
        buf.extend_from_slice(b"}]}\n\n");
    }
}

/// `text` as a JSON string.
fn string(buf: &mut Vec<u8>, text: &str) {
    // Writing a string into a Vec cannot fail.
    if serde_json::to_writer(&mut *buf, text).is_err() {
        buf.extend_from_slice(b"\"\"");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openai::{ChatChunk, ChatChunkChoice, Delta};
    use crate::output::sse;

    fn by_serde(
        header: Header<'_>,
        index: u32,
        content: &str,
        finish: Option<&'static str>,
    ) -> Vec<u8> {
        let chunk = ChatChunk {
            header,
            choices: vec![ChatChunkChoice {
                index,
                delta: Delta {
                    content: (!content.is_empty()).then(|| content.to_owned()),
                    ..Delta::default()
                },
                logprobs: None,
                finish_reason: finish,
                token_ids: None,
            }],
            usage: None,
            prompt_logprobs: None,
            prompt_token_ids: None,
        };
        let mut buf = Vec::new();
        sse::push_event(&mut buf, &chunk);
        buf
    }

    fn header<'a>(id: &'a str, model: &'a str) -> Header<'a> {
        Header {
            id,
            object: "chat.completion.chunk",
            created: 1_764_000_000,
            model,
        }
    }

    #[test]
    fn same_bytes_as_serde() {
        let contents = [
            "",
            "Hello",
            " world",
            "\"quoted\"\n\ttab\\",
            "你好🦀",
            "\u{1}\u{1f}\u{7f}",
            "</script>",
        ];
        for (id, model) in [
            ("chatcmpl-1", "demo"),
            ("chatcmpl-\"x\"", "dir/with \\ slash"),
        ] {
            let chunks = ContentChunks::new(&header(id, model));
            for content in contents {
                for finish in [None, Some("stop"), Some("length")] {
                    for index in [0, 3, 4_000_000_000] {
                        let mut buf = b"before".to_vec();
                        chunks.push(&mut buf, index, content, finish);
                        let want = [
                            &b"before"[..],
                            &by_serde(header(id, model), index, content, finish),
                        ]
                        .concat();
                        assert_eq!(
                            String::from_utf8(buf).unwrap(),
                            String::from_utf8(want).unwrap()
                        );
                    }
                }
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_same_bytes_as_serde(content in proptest::prelude::any::<String>(), index in 0u32..8) {
            let chunks = ContentChunks::new(&header("chatcmpl-p", "m"));
            let mut buf = Vec::new();
            chunks.push(&mut buf, index, &content, None);
            proptest::prop_assert_eq!(buf, by_serde(header("chatcmpl-p", "m"), index, &content, None));
        }
    }
}
