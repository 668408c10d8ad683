//! The tool-call formats (`--tool-call-parser` names, vLLM's), each one's markers, and
//! the wrapper syntax of the JSON formats around their call bodies
//! ([`json_call`](super::json_call)): where a call may start, and how a committed call's
//! text ends. Mirrors `server/parsers/tools/formats.py`.
//!
//! Byte-level sources: `hermes` — Hermes 2 Pro / Qwen2.5 / Qwen3 model cards
//! (`<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`); `llama3_json` — Llama
//! 3.1 model card, "JSON based tool calling" (`{"name": ..., "parameters": ...}`, optional
//! `<|python_tag|>`); `mistral` — mistral-common tokenizer docs (`[TOOL_CALLS]` then a
//! JSON list, v11+ `[TOOL_CALLS]NAME[ARGS]{...}`); `deepseek_v3` — DeepSeek-V3 chat
//! template (`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n
//! {...}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>`); `granite` — IBM Granite 3.x model
//! card (`<|tool_call|>[{...}]`); `qwen3_coder` — Qwen3-Coder model card
//! (`<function=NAME><parameter=P>V</parameter></function>`); `pythonic` — Llama 3.2 /
//! Llama 4 model cards (`[f(a=1), g(b='x')]`); `demo` — the demo model's template.

use serde_json::Value;

use super::json_call::{self, Closer, Cursor, Found, Stop};
use super::settings::{ToolMode, ToolSettings};

/// Every tool-call format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolFormat {
    Demo,
    Hermes,
    Llama3Json,
    Mistral,
    DeepseekV3,
    Qwen3Coder,
    Pythonic,
    Granite,
}

/// The format names (`--tool-call-parser`; `auto` is [`crate::parsers::select`]'s).
pub const PARSER_NAMES: &[&str] = &[
    "demo",
    "hermes",
    "llama3_json",
    "mistral",
    "deepseek_v3",
    "qwen3_coder",
    "pythonic",
    "granite",
];

const ALL: [ToolFormat; 8] = [
    ToolFormat::Demo,
    ToolFormat::Hermes,
    ToolFormat::Llama3Json,
    ToolFormat::Mistral,
    ToolFormat::DeepseekV3,
    ToolFormat::Qwen3Coder,
    ToolFormat::Pythonic,
    ToolFormat::Granite,
];

pub const DEMO_BEGIN: &str = "<｜tool▁call▁begin｜>";
pub const DEMO_END: &str = "<｜tool▁call▁end｜>";
pub const HERMES_BEGIN: &str = "<tool_call>";
pub const HERMES_END: &str = "</tool_call>";
pub const PYTHON_TAG: &str = "<|python_tag|>";
pub const MISTRAL_BEGIN: &str = "[TOOL_CALLS]";
pub const MISTRAL_ARGS: &str = "[ARGS]";
pub const DEEPSEEK_BEGIN: &str = "<｜tool▁calls▁begin｜>";
pub const DEEPSEEK_END: &str = "<｜tool▁calls▁end｜>";
pub const DEEPSEEK_CALL: &str = "<｜tool▁call▁begin｜>";
pub const DEEPSEEK_CALL_END: &str = "<｜tool▁call▁end｜>";
pub const DEEPSEEK_SEP: &str = "<｜tool▁sep｜>";
pub const GRANITE_BEGIN: &str = "<|tool_call|>";
pub const PYTHON_START: &str = "<|python_start|>";
pub const PYTHON_END: &str = "<|python_end|>";

impl ToolFormat {
    pub fn name(self) -> &'static str {
        PARSER_NAMES[ALL.iter().position(|f| *f == self).unwrap_or(0)]
    }

    pub fn from_name(name: &str) -> Option<Self> {
        PARSER_NAMES.iter().position(|n| *n == name).map(|i| ALL[i])
    }

    /// `(begin, end)` of the formats forced natively (prefill + their own tag).
    pub fn native(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Demo => Some((DEMO_BEGIN, DEMO_END)),
            Self::Hermes => Some((HERMES_BEGIN, HERMES_END)),
            _ => None,
        }
    }

    /// The marker that opens calls in content (`None`: calls only at the output's start).
    pub fn begin(self) -> Option<&'static str> {
        match self {
            Self::Demo => Some(DEMO_BEGIN),
            Self::Hermes | Self::Qwen3Coder => Some(HERMES_BEGIN),
            Self::Mistral => Some(MISTRAL_BEGIN),
            Self::DeepseekV3 => Some(DEEPSEEK_BEGIN),
            Self::Granite => Some(GRANITE_BEGIN),
            Self::Llama3Json | Self::Pythonic => None,
        }
    }
}

/// The format of a parser name.
pub fn format_of(name: &str) -> Option<ToolFormat> {
    ToolFormat::from_name(name)
}

/// Text appended to the prompt to force a call (`None`: nothing is forced; only the
/// native formats prefill).
pub fn prefill(format: ToolFormat, settings: &ToolSettings) -> Option<String> {
    let (begin, _) = format.native()?;
    match settings.mode {
        ToolMode::Required => Some(begin.to_owned()),
        ToolMode::Named => Some(format!(
            "{begin}{}",
            call_prefix(settings.name.as_deref().unwrap_or_default())
        )),
        ToolMode::None | ToolMode::Auto => None,
    }
}

/// The start of a named call's body, up to its arguments.
pub fn call_prefix(name: &str) -> String {
    let quoted = Value::String(name.to_owned()).to_string();
    format!("{{\"name\": {quoted}, \"arguments\": ")
}

/// Where a JSON-format grammar starts reading held text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// At the format's begin marker.
    Marker,
    /// At the output's start (`llama3_json`, `pythonic`, forced JSON lists).
    Start,
    /// At a further body of a list (after its separator).
    Item,
    /// At a forced native call's arguments (the prompt wrote up to them).
    Value,
    /// At a further `deepseek_v3` call (its `<｜tool▁call▁begin｜>`).
    Deepseek,
}

/// A JSON format's grammar from `entry` to its commit point (`forced`: the forced
/// JSON list of vLLM's format-independent forcing).
pub fn pre(
    format: ToolFormat,
    forced: bool,
    entry: Entry,
    cur: &mut Cursor<'_>,
    known: &dyn Fn(&str) -> bool,
    named: Option<&str>,
) -> Result<Found, Stop> {
    use ToolFormat as F;
    let wrapped = |end| Closer::Wrapped(end);
    match (format, entry) {
        (_, Entry::Value) => {
            let (_, end) = format.native().ok_or(Stop::Fail(0))?;
            cur.ws();
            json_call::value(cur, named.unwrap_or_default().to_owned(), wrapped(end))
        }
        (_, Entry::Start) if forced => {
            cur.ws();
            cur.expect("[")?;
            json_call::body(cur, known, Closer::List)
        }
        // A further call of the forced list: its `]` is the list's end, in every format.
        (_, Entry::Item) if forced => json_call::body(cur, known, Closer::List),
        (F::Demo | F::Hermes, Entry::Marker) => {
            let (begin, end) = format.native().ok_or(Stop::Fail(0))?;
            cur.expect(begin)?;
            json_call::body(cur, known, wrapped(end))
        }
        (F::Demo | F::Hermes, _) => {
            let (_, end) = format.native().ok_or(Stop::Fail(0))?;
            json_call::body(cur, known, wrapped(end))
        }
        (F::Granite, Entry::Marker) => {
            cur.expect(GRANITE_BEGIN)?;
            cur.ws();
            cur.expect("[")?;
            json_call::body(cur, known, Closer::List)
        }
        (F::Mistral, Entry::Marker) => {
            cur.expect(MISTRAL_BEGIN)?;
            cur.ws();
            if cur.lit("[")? {
                return json_call::body(cur, known, Closer::List);
            }
            let start = cur.i;
            let name = cur.take_while(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))?;
            if name.is_empty() {
                return Err(Stop::Fail(start));
            }
            cur.expect(MISTRAL_ARGS)?;
            if !known(name) {
                return Err(Stop::Fail(cur.i));
            }
            cur.ws();
            match json_call::value(cur, name.to_owned(), Closer::Bare)? {
                raw @ Found::Raw { .. } => Ok(raw),
                _ => Err(Stop::Fail(cur.i)),
            }
        }
        (F::Llama3Json, Entry::Start) => {
            cur.ws();
            if cur.lit(PYTHON_TAG)? {
                cur.ws();
            }
            json_call::body(cur, known, Closer::Llama)
        }
        (F::DeepseekV3, Entry::Marker) => {
            cur.expect(DEEPSEEK_BEGIN)?;
            cur.ws();
            deepseek_call(cur, known)
        }
        (F::DeepseekV3, _) => deepseek_call(cur, known),
        (F::Llama3Json, _) => json_call::body(cur, known, Closer::Llama),
        _ => json_call::body(cur, known, Closer::List),
    }
}

/// `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n` up to the arguments' `{`.
fn deepseek_call(cur: &mut Cursor<'_>, known: &dyn Fn(&str) -> bool) -> Result<Found, Stop> {
    cur.expect(DEEPSEEK_CALL)?;
    cur.expect("function")?;
    cur.expect(DEEPSEEK_SEP)?;
    let name = cur.take_while(|c| c != '\n' && c != '<')?;
    if !known(name) {
        return Err(Stop::Fail(cur.i));
    }
    cur.expect("\n")?;
    cur.expect("```json")?;
    cur.ws();
    match json_call::value(cur, name.to_owned(), Closer::Deepseek)? {
        raw @ Found::Raw { .. } => Ok(raw),
        _ => Err(Stop::Fail(cur.i)),
    }
}

/// What follows a call's closing syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Whitespace is dropped, then content.
    Content,
    /// Another call from this grammar entry.
    Next(Entry),
    /// `pythonic`: another call's NAME.
    NextKwargs,
}

/// A call's closing syntax (`brace`: the body's own `}` is still due), whitespace after a
/// separator included: bytes taken and what follows; `Fail(n)`: stray text from `n` on
/// (content).
pub fn close(close: Closer, brace: bool, cur: &mut Cursor<'_>) -> Result<After, Stop> {
    cur.ws();
    if brace {
        cur.expect("}")?;
        cur.ws();
    }
    match close {
        Closer::Wrapped(end) => {
            cur.expect(end)?;
            Ok(After::Content)
        }
        Closer::List => {
            if cur.lit(",")? {
                cur.ws();
                return Ok(After::Next(Entry::Item));
            }
            cur.expect("]")?;
            Ok(After::Content)
        }
        Closer::Llama => {
            cur.expect(";")?;
            cur.ws();
            Ok(After::Next(Entry::Item))
        }
        Closer::Bare => Ok(After::Content),
        Closer::Deepseek => {
            cur.expect("```")?;
            cur.ws();
            cur.expect(DEEPSEEK_CALL_END)?;
            cur.ws();
            if cur.lit(DEEPSEEK_CALL)? {
                cur.i -= DEEPSEEK_CALL.len();
                return Ok(After::Next(Entry::Deepseek));
            }
            cur.expect(DEEPSEEK_END)?;
            Ok(After::Content)
        }
        Closer::Qwen => {
            cur.expect(HERMES_END)?;
            Ok(After::Content)
        }
        Closer::Py => {
            if cur.lit(",")? {
                cur.ws();
                return Ok(After::NextKwargs);
            }
            cur.expect("]")?;
            cur.ws();
            if cur.rest().is_empty() {
                return Err(Stop::Need);
            }
            cur.lit(PYTHON_END)?;
            Ok(After::Content)
        }
    }
}
