//! Reasoning (`--reasoning-parser`): the streaming parser that splits a chat answer into
//! reasoning and content by its format's start and end markers
//! (`server/contracts/reasoning_formats.json`), holding back a tail that could begin a
//! marker, and knows where the reasoning block lies in the text pushed so far
//! ([`ReasoningParser::side`], for `crate::output::reasoning_tokens`). Mirrors
//! `server/parsers/reasoning.py`. Behaviour: docs/api.md, "Reasoning".

use std::sync::LazyLock;

use serde::Deserialize;

use crate::parsers::markers::{find_any, held_suffix_any, rfind_any};
use crate::parsers::tools::formats::TemplateRule;

/// The markers of one reasoning format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReasoningMarkers {
    pub start: &'static [&'static str],
    pub end: &'static [&'static str],
}

const FILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../server/contracts/reasoning_formats.json"
));

/// One format of the contract file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Format {
    name: String,
    start: Vec<String>,
    end: Vec<String>,
    #[allow(dead_code)]
    source: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Auto {
    template: Vec<TemplateRule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Contract {
    #[allow(dead_code)]
    about: String,
    formats: Vec<Format>,
    auto: Auto,
}

/// `server/contracts/reasoning_formats.json`, compiled in: the names, markers and `auto`
/// rules the Python server reads too.
static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    serde_json::from_str(FILE)
        .expect("server/contracts/reasoning_formats.json (compiled in) parses")
});

/// One format's name and markers, borrowed from [`CONTRACT`].
struct Entry {
    name: &'static str,
    start: Vec<&'static str>,
    end: Vec<&'static str>,
}

/// Each format, in the file's order.
static FORMATS: LazyLock<Vec<Entry>> = LazyLock::new(|| {
    let strs =
        |v: &'static [String]| -> Vec<&'static str> { v.iter().map(String::as_str).collect() };
    CONTRACT
        .formats
        .iter()
        .map(|f| Entry {
            name: &f.name,
            start: strs(&f.start),
            end: strs(&f.end),
        })
        .collect()
});

/// The reasoning parser names (`--reasoning-parser`), in the contract file's order.
pub fn parser_names() -> impl Iterator<Item = &'static str> {
    FORMATS.iter().map(|e| e.name)
}

/// `auto`'s template rules, in order: the first whose strings all appear wins.
pub fn template_rules() -> &'static [TemplateRule] {
    &CONTRACT.auto.template
}

/// The markers of a parser name.
pub fn markers_of(name: &str) -> Option<ReasoningMarkers> {
    FORMATS
        .iter()
        .find(|e| e.name == name)
        .map(|e| ReasoningMarkers {
            start: &e.start,
            end: &e.end,
        })
}

/// Whether the prompt leaves a reasoning block of `markers` open for the answer.
pub fn starts_inside(markers: ReasoningMarkers, prompt: &str) -> bool {
    match (
        rfind_any(prompt, markers.start),
        rfind_any(prompt, markers.end),
    ) {
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
    markers: ReasoningMarkers,
    state: State,
    buffer: String,
    /// Bytes pushed so far.
    pushed: usize,
    /// Where the reasoning block begins (its start marker, or 0 when the prompt left it
    /// open) and ends (just past its end marker), in the text pushed so far.
    start: Option<usize>,
    end: Option<usize>,
}

impl ReasoningParser {
    pub fn new(markers: ReasoningMarkers, inside: bool) -> Self {
        Self {
            markers,
            state: if inside { State::Inside } else { State::Before },
            buffer: String::new(),
            pushed: 0,
            start: inside.then_some(0),
            end: None,
        }
    }

    /// (reasoning, content) safe to emit now.
    pub fn push(&mut self, text: &str) -> (String, String) {
        self.pushed += text.len();
        if self.state == State::After {
            return (String::new(), text.to_owned());
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.push_str(text);
        // Where `buffer` begins in the whole text.
        let mut at = self.pushed - buffer.len();
        let mut content = String::new();
        if self.state == State::Before {
            let Some((start, len)) = find_any(&buffer, self.markers.start) else {
                let keep = held_suffix_any(&buffer, self.markers.start);
                self.buffer = buffer.split_off(buffer.len() - keep);
                return (String::new(), buffer);
            };
            content.push_str(&buffer[..start]);
            buffer.drain(..start + len);
            self.start = Some(at + start);
            at += start + len;
            self.state = State::Inside;
        }
        let Some((end, len)) = find_any(&buffer, self.markers.end) else {
            let keep = held_suffix_any(&buffer, self.markers.end);
            self.buffer = buffer.split_off(buffer.len() - keep);
            return (buffer, content);
        };
        self.state = State::After;
        self.end = Some(at + end + len);
        content.push_str(&buffer[end + len..]);
        buffer.truncate(end);
        (buffer, content)
    }

    /// The side of the text at byte `offset` of everything pushed: `Some(true)` inside
    /// the reasoning block (its markers included), `Some(false)` outside it, `None` not
    /// known yet (held back as a possible start marker, or not pushed yet).
    pub fn side(&self, offset: usize) -> Option<bool> {
        if self.end.is_some_and(|end| offset >= end) {
            return Some(false);
        }
        match (self.state, self.start) {
            (State::Before, _) => (offset < self.pushed - self.buffer.len()).then_some(false),
            (_, Some(start)) if offset < start => Some(false),
            (State::Inside, _) => (offset < self.pushed).then_some(true),
            (State::After, _) => Some(true),
        }
    }

    /// The side of `offset` once the text is over ([`Self::finish`]): what is not known
    /// yet is on the side the parser ended on.
    pub fn final_side(&self, offset: usize) -> bool {
        self.side(offset)
            .unwrap_or(self.state == State::Inside && self.start.is_some_and(|s| offset >= s))
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
mod tests;
