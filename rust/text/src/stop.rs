//! Stop strings matched across streamed chunks.

/// What one [`StopMatcher::push`] produced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StopOutcome {
    /// Text that is safe to send now (everything before a stop string).
    pub emit: String,
    /// The stop string that matched; the request should finish with reason "stop".
    pub stopped: Option<String>,
}

/// Finds the first stop string in a stream of text chunks.
///
/// Text that could be the start of a stop string is held back until the next chunk shows
/// whether it is one (at most `len(longest stop) - 1` bytes, always whole characters).
/// After a stop matched, further pushes are ignored.
#[derive(Debug, Clone)]
pub struct StopMatcher {
    stops: Vec<String>,
    include_stop: bool,
    pending: String,
    stopped: bool,
}

impl StopMatcher {
    /// A matcher for `stops` (empty strings are ignored).
    pub fn new<I, S>(stops: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let stops = stops
            .into_iter()
            .map(Into::into)
            .filter(|s: &String| !s.is_empty())
            .collect();
        Self {
            stops,
            include_stop: false,
            pending: String::new(),
            stopped: false,
        }
    }

    /// Emit the matched stop string too (vLLM's `include_stop_str_in_output`).
    pub fn include_stop_in_output(mut self, yes: bool) -> Self {
        self.include_stop = yes;
        self
    }

    /// True when there is no stop string (every push emits its text at once).
    pub fn is_empty(&self) -> bool {
        self.stops.is_empty()
    }

    /// True once a stop string matched.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Feeds the next chunk of text.
    pub fn push(&mut self, text: &str) -> StopOutcome {
        if self.stopped {
            return StopOutcome::default();
        }
        if self.stops.is_empty() {
            return StopOutcome {
                emit: text.to_owned(),
                stopped: None,
            };
        }
        // `pending` is the held-back tail (shorter than the longest stop) plus `text`.
        self.pending.push_str(text);
        if let Some((pos, stop)) = self.earliest_match() {
            self.stopped = true;
            let end = if self.include_stop {
                pos + stop.len()
            } else {
                pos
            };
            let mut emit = std::mem::take(&mut self.pending);
            emit.truncate(end);
            return StopOutcome {
                emit,
                stopped: Some(stop),
            };
        }
        let hold = self.partial_suffix_len();
        let emit_len = self.pending.len() - hold;
        let emit: String = self.pending[..emit_len].to_owned();
        self.pending.drain(..emit_len);
        StopOutcome {
            emit,
            stopped: None,
        }
    }

    /// Releases the held-back text at the end of the stream (no stop matched).
    pub fn flush(&mut self) -> String {
        if self.stopped {
            return String::new();
        }
        std::mem::take(&mut self.pending)
    }

    /// The earliest stop occurrence in `pending` (ties: the longest stop).
    fn earliest_match(&self) -> Option<(usize, String)> {
        let mut best: Option<(usize, &String)> = None;
        for stop in &self.stops {
            if let Some(pos) = self.pending.find(stop.as_str()) {
                let better = match best {
                    None => true,
                    Some((p, s)) => pos < p || (pos == p && stop.len() > s.len()),
                };
                if better {
                    best = Some((pos, stop));
                }
            }
        }
        best.map(|(p, s)| (p, s.clone()))
    }

    /// Length of the longest suffix of `pending` (at a char boundary) that is a proper
    /// prefix of some stop string.
    fn partial_suffix_len(&self) -> usize {
        let max = self
            .stops
            .iter()
            .map(|s| s.len() - 1)
            .max()
            .unwrap_or(0)
            .min(self.pending.len());
        (1..=max)
            .rev()
            .filter(|&n| self.pending.is_char_boundary(self.pending.len() - n))
            .find(|&n| {
                let suffix = &self.pending[self.pending.len() - n..];
                self.stops
                    .iter()
                    .any(|s| s.len() > n && s.starts_with(suffix))
            })
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks`, returns (all emitted text, stop).
    fn run(stops: &[&str], chunks: &[&str]) -> (String, Option<String>) {
        let mut m = StopMatcher::new(stops.iter().copied());
        let mut out = String::new();
        for chunk in chunks {
            let o = m.push(chunk);
            out.push_str(&o.emit);
            if o.stopped.is_some() {
                return (out, o.stopped);
            }
        }
        out.push_str(&m.flush());
        (out, None)
    }

    #[test]
    fn stop_across_chunks() {
        assert_eq!(
            run(&["STOP"], &["abc ST", "O", "P tail"]),
            ("abc ".into(), Some("STOP".into()))
        );
        assert_eq!(
            run(&["STOP"], &["abc STOP"]),
            ("abc ".into(), Some("STOP".into()))
        );
        assert_eq!(
            run(&["\n\n"], &["a\n", "\nb"]),
            ("a".into(), Some("\n\n".into()))
        );
    }

    #[test]
    fn holds_back_only_possible_prefixes() {
        let mut m = StopMatcher::new(["STOP"]);
        assert_eq!(m.push("hello S").emit, "hello ");
        assert_eq!(m.push("x").emit, "Sx");
        assert_eq!(m.push("ST").emit, "");
        assert_eq!(m.push("OX").emit, "STOX");
        assert_eq!(m.push("STO").emit, "");
        assert_eq!(m.flush(), "STO");
    }

    #[test]
    fn no_stop_passes_through() {
        assert_eq!(run(&[], &["a", "b"]), ("ab".into(), None));
        assert_eq!(run(&[""], &["a", "b"]), ("ab".into(), None));
        assert_eq!(run(&["zz"], &["a", "b"]), ("ab".into(), None));
    }

    #[test]
    fn earliest_stop_wins_and_then_silence() {
        let mut m = StopMatcher::new(["world", "lo w"]);
        let o = m.push("hello world");
        assert_eq!(
            o,
            StopOutcome {
                emit: "hel".into(),
                stopped: Some("lo w".into())
            }
        );
        assert!(m.is_stopped());
        assert_eq!(m.push("more"), StopOutcome::default());
        assert_eq!(m.flush(), "");
    }

    #[test]
    fn multibyte_is_char_safe() {
        // Stop "日本" shares its first byte with "旧" (E6 97 A7 vs E6 97 A5).
        assert_eq!(
            run(&["日本"], &["こ日", "本語"]),
            ("こ".into(), Some("日本".into()))
        );
        assert_eq!(
            run(&["日本"], &["旧", "日", "x🦀"]),
            ("旧日x🦀".into(), None)
        );
        let mut m = StopMatcher::new(["🦀🦀"]);
        assert_eq!(m.push("a🦀").emit, "a");
        assert_eq!(m.push("b").emit, "🦀b");
    }

    #[test]
    fn include_stop_in_output() {
        let mut m = StopMatcher::new(["</s>"]).include_stop_in_output(true);
        assert_eq!(m.push("x</").emit, "x");
        assert_eq!(m.push("s>y").emit, "</s>");
    }
}
