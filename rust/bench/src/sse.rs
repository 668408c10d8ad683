//! Server-sent event framing of a streamed response (frames may split anywhere across
//! network reads); what each event's data means is [`crate::payload`]'s business.

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
}
