//! Reasoning: `--reasoning-parser` splits `<think>…</think>` out of a chat answer into
//! `reasoning_content`. Mirrors `server/parsers/reasoning.py`.
//!
//! `deepseek_r1` and `qwen3` (vLLM's names) are the same parser. When the rendered
//! prompt leaves a `<think>` open the output starts inside the reasoning; otherwise it
//! starts as content and a `<think>` in the output opens it. After the first `</think>`
//! everything is content. Partial markers wait for the next piece; at the end whatever
//! is held goes to the side it was on.

use crate::parsers::markers::held_suffix;

pub const REASONING_PARSERS: &[&str] = &["deepseek_r1", "qwen3"];
pub const THINK_START: &str = "<think>";
pub const THINK_END: &str = "</think>";

/// The `--reasoning-parser` value checked.
pub fn check_parser(setting: Option<&str>) -> Result<Option<String>, String> {
    match setting {
        None => Ok(None),
        Some(name) if REASONING_PARSERS.contains(&name) => Ok(Some(name.to_owned())),
        Some(other) => Err(format!(
            "reasoning_parser must be one of {}; got {other:?}",
            REASONING_PARSERS.join(", ")
        )),
    }
}

/// Whether the prompt leaves a reasoning block open for the answer.
pub fn starts_inside(prompt: &str) -> bool {
    match (prompt.rfind(THINK_START), prompt.rfind(THINK_END)) {
        (Some(start), Some(end)) => start > end,
        (Some(_), None) => true,
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Before,
    Inside,
    After,
}

/// Splits streamed text into (reasoning, content) pieces.
#[derive(Debug)]
pub struct ReasoningParser {
    state: State,
    buffer: String,
}

impl ReasoningParser {
    pub fn new(inside: bool) -> Self {
        Self {
            state: if inside { State::Inside } else { State::Before },
            buffer: String::new(),
        }
    }

    /// (reasoning, content) safe to emit now.
    pub fn push(&mut self, text: &str) -> (String, String) {
        if self.state == State::After {
            return (String::new(), text.to_owned());
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.push_str(text);
        let mut content = String::new();
        if self.state == State::Before {
            let Some(start) = buffer.find(THINK_START) else {
                let keep = held_suffix(&buffer, THINK_START);
                self.buffer = buffer.split_off(buffer.len() - keep);
                return (String::new(), buffer);
            };
            content.push_str(&buffer[..start]);
            buffer.drain(..start + THINK_START.len());
            self.state = State::Inside;
        }
        let Some(end) = buffer.find(THINK_END) else {
            let keep = held_suffix(&buffer, THINK_END);
            self.buffer = buffer.split_off(buffer.len() - keep);
            return (buffer, content);
        };
        self.state = State::After;
        content.push_str(&buffer[end + THINK_END.len()..]);
        buffer.truncate(end);
        (buffer, content)
    }

    /// Whatever is held back, on the side it was on.
    pub fn finish(&mut self) -> (String, String) {
        let buffer = std::mem::take(&mut self.buffer);
        if self.state == State::Inside {
            (buffer, String::new())
        } else {
            (String::new(), buffer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(inside: bool, pieces: &[&str]) -> (String, String) {
        let mut parser = ReasoningParser::new(inside);
        let (mut reasoning, mut content) = (String::new(), String::new());
        for piece in pieces {
            let (r, c) = parser.push(piece);
            reasoning.push_str(&r);
            content.push_str(&c);
        }
        let (r, c) = parser.finish();
        (reasoning + &r, content + &c)
    }

    #[test]
    fn markers_split_over_pieces() {
        let text = "<think>plan a</think>answer";
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(run(false, &pieces), ("plan a".into(), "answer".into()));
        assert_eq!(
            run(false, &["<thi", "nk>x</th", "ink>y"]),
            ("x".into(), "y".into())
        );
        assert_eq!(
            run(true, &["x</th", "ink>y<think>z"]),
            ("x".into(), "y<think>z".into())
        );
    }

    #[test]
    fn unterminated_and_absent_reasoning() {
        assert_eq!(
            run(true, &["still thinking</thi"]),
            ("still thinking</thi".into(), String::new())
        );
        assert_eq!(
            run(false, &["no thoughts <thin"]),
            (String::new(), "no thoughts <thin".into())
        );
        assert_eq!(run(false, &["a<think>b"]), ("b".into(), "a".into()));
    }

    #[test]
    fn prompt_state_and_names() {
        assert!(starts_inside("<｜Assistant｜><think>"));
        assert!(!starts_inside("<｜Assistant｜></think>"));
        assert!(!starts_inside("<think>x</think> plain"));
        assert!(!starts_inside("plain"));
        assert_eq!(check_parser(Some("qwen3")), Ok(Some("qwen3".into())));
        assert!(check_parser(Some("x")).unwrap_err().contains("deepseek_r1"));
    }
}
