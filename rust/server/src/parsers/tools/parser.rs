//! The streaming tool-call parser: generated text in, content and call deltas out.
//! `push(text)` and `finish()` give a [`ToolDelta`]; a call is committed (its first
//! [`CallDelta`], with `id` and `name`) only once the format's grammar is sure it is a call of
//! a function in `tools`, and until then its text is held. Mirrors
//! `server/parsers/tools/parser.py`. Behaviour: docs/api.md, "Tool calls".

use serde_json::Value;

use emitter::Emitter;
pub use emitter::{new_call_id, CallDelta, ToolCall, ToolDelta};

use super::formats::{self, After, Entry, ToolFormat};
use super::json_call::{decode_string, Closer, Cursor, Found, ObjScan, Stop};
use super::settings::{ToolMode, ToolSettings};
use super::{pythonic, qwen3_coder};
use crate::parsers::markers::held_suffix;

mod emitter;

const JSON_WS: [char; 4] = [' ', '\t', '\n', '\r'];

#[derive(Debug)]
enum Phase {
    /// Looking for the begin marker.
    Content,
    /// Everything is content (formats whose calls only start the output).
    PassThrough,
    /// Dropping whitespace after a call.
    SkipWs,
    /// Held text from a possible call start.
    Pre(Entry),
    /// Streaming a raw arguments object.
    Raw(ObjScan, Closer),
    /// Streaming a JSON string's text.
    Str(Closer),
    /// A call's closing syntax (`bool`: the body's `}` is due).
    Close(Closer, bool),
    /// `qwen3_coder` parameters.
    Params { first: bool },
    /// `pythonic` keyword arguments.
    Kwargs { first: bool, after_arg: bool },
    /// Forced JSON for a named function: all text is its arguments.
    Named { committed: bool },
}

/// Splits streamed text into content and tool calls (see the module docs).
#[derive(Debug)]
pub struct ToolCallParser {
    format: ToolFormat,
    /// vLLM's format-independent forced JSON.
    forced: bool,
    named: Option<String>,
    phase: Phase,
    buf: String,
    out: Emitter,
    /// The committed call's `parameters` schema.
    parameters: Option<Value>,
}

impl ToolCallParser {
    pub fn new(format: ToolFormat, settings: &ToolSettings) -> Self {
        let forcing = matches!(settings.mode, ToolMode::Required | ToolMode::Named);
        let native = format.native().is_some();
        let phase = match (settings.mode, native) {
            (ToolMode::Required, true) => Phase::Pre(Entry::Item),
            (ToolMode::Named, true) => Phase::Pre(Entry::Value),
            (ToolMode::Named, false) => Phase::Named { committed: false },
            (ToolMode::Required, false) => Phase::Pre(Entry::Start),
            _ if format.begin().is_some() => Phase::Content,
            _ => Phase::Pre(Entry::Start),
        };
        let tools = settings
            .tools
            .iter()
            .flatten()
            .filter_map(|t| {
                let f = t.get("function")?;
                let name = f.get("name")?.as_str()?.to_owned();
                Some((name, f.get("parameters").cloned()))
            })
            .collect();
        Self {
            format,
            forced: forcing && !native,
            named: settings.name.clone(),
            phase,
            buf: String::new(),
            out: Emitter {
                tools,
                parallel: settings.parallel,
                mistral: format == ToolFormat::Mistral,
                forced: forcing,
                made: 0,
                dropping: false,
                delta: ToolDelta::default(),
            },
            parameters: None,
        }
    }

    /// Calls committed so far (dropped ones not counted).
    pub fn calls_made(&self) -> usize {
        self.out.made
    }

    /// The next piece of generated text.
    pub fn push(&mut self, text: &str) -> ToolDelta {
        self.buf.push_str(text);
        self.run(false)
    }

    /// The end of the output.
    pub fn finish(&mut self) -> ToolDelta {
        self.run(true)
    }

    fn run(&mut self, end: bool) -> ToolDelta {
        while self.step(end) {}
        std::mem::take(&mut self.out.delta)
    }

    fn content_phase(&self) -> Phase {
        if self.forced || self.format.begin().is_none() {
            Phase::PassThrough
        } else {
            Phase::Content
        }
    }

    /// Content up to `n`, then content state.
    fn release(&mut self, n: usize) {
        let rest = self.buf.split_off(n);
        let held = std::mem::replace(&mut self.buf, rest);
        self.out.content(&held);
        self.phase = self.content_phase();
    }

    /// One move; `false` when waiting for more text (or done at the end).
    fn step(&mut self, end: bool) -> bool {
        match &mut self.phase {
            Phase::Content => {
                let begin = self.format.begin().unwrap_or_default();
                if let Some(i) = self.buf.find(begin).filter(|_| !begin.is_empty()) {
                    self.out.content(&self.buf[..i]);
                    self.buf.drain(..i);
                    self.phase = Phase::Pre(Entry::Marker);
                    return true;
                }
                let keep = if end {
                    0
                } else {
                    held_suffix(&self.buf, begin)
                };
                let held = self.buf.split_off(self.buf.len() - keep);
                let text = std::mem::replace(&mut self.buf, held);
                self.out.content(&text);
                false
            }
            Phase::PassThrough => {
                let text = std::mem::take(&mut self.buf);
                self.out.content(&text);
                false
            }
            Phase::SkipWs => {
                let n = self.buf.len() - self.buf.trim_start_matches(JSON_WS).len();
                self.buf.drain(..n);
                if self.buf.is_empty() {
                    return false;
                }
                self.phase = self.content_phase();
                true
            }
            Phase::Pre(entry) => {
                let entry = *entry;
                if entry == Entry::Item {
                    // Whitespace after a separator is closing syntax.
                    let n = self.buf.len() - self.buf.trim_start_matches(JSON_WS).len();
                    self.buf.drain(..n);
                }
                let found = self.pre(entry);
                match found {
                    Ok(found) => self.commit(found),
                    Err(Stop::Need) if !end => return false,
                    Err(Stop::Need) => self.release(self.buf.len()),
                    Err(Stop::Fail(n)) => {
                        let first = self.buf.chars().next().map_or(0, char::len_utf8);
                        let n = if n == 0 && entry == Entry::Marker {
                            first
                        } else {
                            n
                        };
                        self.release(n);
                    }
                }
                true
            }
            Phase::Raw(scan, close) => {
                let close = *close;
                match scan.feed(&self.buf) {
                    Some(n) => {
                        self.out.arguments(&self.buf[..n]);
                        self.buf.drain(..n);
                        let brace = !matches!(close, Closer::Bare | Closer::Deepseek);
                        self.phase = Phase::Close(close, brace);
                        true
                    }
                    None => {
                        let text = std::mem::take(&mut self.buf);
                        self.out.arguments(&text);
                        false
                    }
                }
            }
            Phase::Str(close) => {
                let close = *close;
                let (text, taken, closed) = decode_string(&self.buf);
                self.out.arguments(&text);
                self.buf.drain(..taken);
                if closed {
                    self.phase = Phase::Close(close, true);
                    return true;
                }
                if end {
                    self.buf.clear();
                }
                false
            }
            Phase::Close(close, brace) => {
                let (close, brace) = (*close, *brace);
                let mut cur = Cursor::new(&self.buf);
                match formats::close(close, brace, &mut cur) {
                    Ok(after) => {
                        let n = cur.i;
                        self.buf.drain(..n);
                        self.phase = match after {
                            After::Content => Phase::SkipWs,
                            After::Next(entry) => Phase::Pre(entry),
                            After::NextKwargs => Phase::Pre(Entry::Item),
                        };
                        true
                    }
                    Err(stop) => self.stray(stop, end),
                }
            }
            Phase::Params { first } => {
                let first = *first;
                let mut cur = Cursor::new(&self.buf);
                match qwen3_coder::item(&mut cur, self.parameters.as_ref()) {
                    Ok(qwen3_coder::Item::Param(p)) => {
                        let n = cur.i;
                        self.out
                            .arguments(&format!("{}{p}", if first { "" } else { ", " }));
                        self.buf.drain(..n);
                        self.phase = Phase::Params { first: false };
                        true
                    }
                    Ok(qwen3_coder::Item::End) => {
                        let n = cur.i;
                        self.out.arguments("}");
                        self.buf.drain(..n);
                        self.phase = Phase::Close(Closer::Qwen, false);
                        true
                    }
                    Err(stop) => self.malformed(stop, end),
                }
            }
            Phase::Kwargs { first, after_arg } => {
                let (first, after_arg) = (*first, *after_arg);
                let mut cur = Cursor::new(&self.buf);
                let item = pythonic::item(&mut cur, after_arg, self.parameters.as_ref());
                let n = cur.i;
                self.phase = match item {
                    Ok(pythonic::Item::Arg(a)) => {
                        self.out
                            .arguments(&format!("{}{a}", if first { "" } else { ", " }));
                        Phase::Kwargs {
                            first: false,
                            after_arg: true,
                        }
                    }
                    Ok(pythonic::Item::Sep) => Phase::Kwargs {
                        first,
                        after_arg: false,
                    },
                    Ok(pythonic::Item::End) => {
                        self.out.arguments("}");
                        Phase::Close(Closer::Py, false)
                    }
                    Err(stop) => return self.malformed(stop, end),
                };
                self.buf.drain(..n);
                true
            }
            Phase::Named { committed } => {
                if !*committed {
                    *committed = true;
                    let name = self.named.clone().unwrap_or_default();
                    self.out.commit(name, "");
                }
                let text = std::mem::take(&mut self.buf);
                self.out.arguments(&text);
                false
            }
        }
    }

    fn pre(&self, entry: Entry) -> Result<Found, Stop> {
        let mut cur = Cursor::new(&self.buf);
        let known = |name: &str| self.out.known(name);
        match self.format {
            ToolFormat::Qwen3Coder if !self.forced => qwen3_coder::pre(&mut cur, &known),
            ToolFormat::Pythonic if !self.forced => {
                pythonic::pre(&mut cur, entry == Entry::Start, &known)
            }
            format => formats::pre(
                format,
                self.forced,
                entry,
                &mut cur,
                &known,
                self.named.as_deref(),
            ),
        }
    }

    fn commit(&mut self, found: Found) {
        let (taken, name, args, phase) = match found {
            Found::Raw { at, name, close } => (at, name, "", Phase::Raw(ObjScan::default(), close)),
            Found::Str { at, name, close } => (at, name, "", Phase::Str(close)),
            Found::Whole {
                end,
                name,
                arguments,
                close,
            } => {
                self.buf.drain(..end);
                self.out.commit(name, &arguments);
                self.phase = Phase::Close(close, false);
                return;
            }
            Found::Params { at, name } => (at, name, "{", Phase::Params { first: true }),
            Found::Kwargs { at, name } => (
                at,
                name,
                "{",
                Phase::Kwargs {
                    first: true,
                    after_arg: false,
                },
            ),
        };
        self.parameters = self.out.parameters(&name);
        self.buf.drain(..taken);
        self.out.commit(name, args);
        self.phase = phase;
    }

    /// Closing syntax that stops matching: stray text is content, a cut-off end dropped.
    fn stray(&mut self, stop: Stop, end: bool) -> bool {
        match stop {
            Stop::Need if !end => false,
            Stop::Need => {
                self.buf.clear();
                false
            }
            Stop::Fail(n) => {
                self.buf.drain(..n);
                self.phase = self.content_phase();
                true
            }
        }
    }

    /// Built arguments that stop parsing: closed with `}`, the rest is content.
    fn malformed(&mut self, stop: Stop, end: bool) -> bool {
        if let Stop::Fail(_) = stop {
            self.out.arguments("}");
        }
        self.stray(stop, end)
    }
}
