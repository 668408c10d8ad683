//! The tool-call formats (`--tool-call-parser` names, vLLM's), each one's markers, and
//! the wrapper syntax of the JSON formats around their call bodies
//! ([`json_call`]): where a call may start, and how a committed call's
//! text ends. Mirrors `server/parsers/tools/formats.py`.
//!
//! The names, their order, every marker (with the source of its bytes: model cards, chat
//! templates, tokenizer docs) and the rules of the `auto` choice are
//! `server/contracts/tool_formats.json`'s, compiled in and read by the Python server too;
//! the grammar is here and in the parsers' modules, which take every marker from here.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde::Deserialize;
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

const FILE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../server/contracts/tool_formats.json"
));

/// One format's markers, as the contract file has them (empty: no such marker).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Markers {
    pub name: String,
    /// A call's (or a call list's) opening marker.
    pub begin: String,
    /// Its closing marker.
    pub end: String,
    /// Where the bytes come from.
    pub source: String,
    /// Forced natively: a prefill of `begin` plus the format's own tag.
    #[serde(default)]
    pub native: bool,
    /// `mistral` v11+: between a call's name and its arguments.
    #[serde(default)]
    pub args: String,
    /// `deepseek_v3`: one call's markers inside the list, its type word before the name's
    /// separator, and the fence around its arguments.
    #[serde(default)]
    pub call_begin: String,
    #[serde(default)]
    pub call_end: String,
    #[serde(default)]
    pub call_type: String,
    #[serde(default)]
    pub sep: String,
    #[serde(default)]
    pub args_begin: String,
    #[serde(default)]
    pub args_end: String,
    /// `llama3_json`: between two calls.
    #[serde(default)]
    pub call_sep: String,
    /// `qwen3_coder`: the function's and each parameter's opening (up to the name) and
    /// closing tags.
    #[serde(default)]
    pub function: String,
    #[serde(default)]
    pub function_end: String,
    #[serde(default)]
    pub parameter: String,
    #[serde(default)]
    pub parameter_end: String,
}

/// `auto`: a chat template holding every string of `all` picks `parser`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateRule {
    pub all: Vec<String>,
    pub parser: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Auto {
    template: Vec<TemplateRule>,
    model_type: BTreeMap<String, String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Contract {
    #[allow(dead_code)]
    about: String,
    formats: Vec<Markers>,
    auto: Auto,
}

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    serde_json::from_str(FILE).expect("server/contracts/tool_formats.json (compiled in) parses")
});

/// `auto`'s template rules, in order: the first whose strings all appear wins.
pub fn template_rules() -> &'static [TemplateRule] {
    &CONTRACT.auto.template
}

/// `auto`'s `config.json` `model_type` → format name.
pub fn model_type_parsers() -> impl Iterator<Item = (&'static str, &'static str)> {
    CONTRACT
        .auto
        .model_type
        .iter()
        .map(|(t, p)| (t.as_str(), p.as_str()))
}

/// The format names (`--tool-call-parser`; `auto` is [`crate::parsers::select`]'s), in
/// the contract file's order.
pub static PARSER_NAMES: LazyLock<Vec<&'static str>> =
    LazyLock::new(|| CONTRACT.formats.iter().map(|f| f.name.as_str()).collect());

/// Each format's markers, in [`ALL`]'s order.
static MARKERS: LazyLock<Vec<&'static Markers>> = LazyLock::new(|| {
    ALL.iter()
        .map(|format| {
            CONTRACT
                .formats
                .iter()
                .find(|m| m.name == format.name())
                .expect("server/contracts/tool_formats.json names every ToolFormat")
        })
        .collect()
});

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

impl ToolFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::Demo => "demo",
            Self::Hermes => "hermes",
            Self::Llama3Json => "llama3_json",
            Self::Mistral => "mistral",
            Self::DeepseekV3 => "deepseek_v3",
            Self::Qwen3Coder => "qwen3_coder",
            Self::Pythonic => "pythonic",
            Self::Granite => "granite",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        ALL.into_iter().find(|f| f.name() == name)
    }

    /// The contract file's markers of this format.
    pub fn markers(self) -> &'static Markers {
        MARKERS[self as usize]
    }

    /// `(begin, end)` of the formats forced natively (prefill + their own tag).
    pub fn native(self) -> Option<(&'static str, &'static str)> {
        let m = self.markers();
        m.native.then_some((m.begin.as_str(), m.end.as_str()))
    }

    /// The marker that opens calls in content (`None`: calls only at the output's start).
    pub fn begin(self) -> Option<&'static str> {
        match self {
            Self::Llama3Json | Self::Pythonic => None,
            _ => Some(self.markers().begin.as_str()),
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
            cur.expect(&F::Granite.markers().begin)?;
            cur.ws();
            cur.expect("[")?;
            json_call::body(cur, known, Closer::List)
        }
        (F::Mistral, Entry::Marker) => {
            cur.expect(&F::Mistral.markers().begin)?;
            cur.ws();
            if cur.lit("[")? {
                return json_call::body(cur, known, Closer::List);
            }
            let start = cur.i;
            let name = cur.take_while(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))?;
            if name.is_empty() {
                return Err(Stop::Fail(start));
            }
            cur.expect(&F::Mistral.markers().args)?;
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
            if cur.lit(&F::Llama3Json.markers().begin)? {
                cur.ws();
            }
            json_call::body(cur, known, Closer::Llama)
        }
        (F::DeepseekV3, Entry::Marker) => {
            cur.expect(&F::DeepseekV3.markers().begin)?;
            cur.ws();
            deepseek_call(cur, known)
        }
        (F::DeepseekV3, _) => deepseek_call(cur, known),
        (F::Llama3Json, _) => json_call::body(cur, known, Closer::Llama),
        _ => json_call::body(cur, known, Closer::List),
    }
}

/// `call_begin` `call_type` `sep` NAME `\n` `args_begin` up to the arguments' `{`.
fn deepseek_call(cur: &mut Cursor<'_>, known: &dyn Fn(&str) -> bool) -> Result<Found, Stop> {
    let m = ToolFormat::DeepseekV3.markers();
    cur.expect(&m.call_begin)?;
    cur.expect(&m.call_type)?;
    cur.expect(&m.sep)?;
    let name = cur.take_while(|c| c != '\n' && c != '<')?;
    if !known(name) {
        return Err(Stop::Fail(cur.i));
    }
    cur.expect("\n")?;
    cur.expect(&m.args_begin)?;
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
            cur.expect(&ToolFormat::Llama3Json.markers().call_sep)?;
            cur.ws();
            Ok(After::Next(Entry::Item))
        }
        Closer::Bare => Ok(After::Content),
        Closer::Deepseek => {
            let m = ToolFormat::DeepseekV3.markers();
            cur.expect(&m.args_end)?;
            cur.ws();
            cur.expect(&m.call_end)?;
            cur.ws();
            if cur.lit(&m.call_begin)? {
                cur.i -= m.call_begin.len();
                return Ok(After::Next(Entry::Deepseek));
            }
            cur.expect(&m.end)?;
            Ok(After::Content)
        }
        Closer::Qwen => {
            cur.expect(&ToolFormat::Qwen3Coder.markers().end)?;
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
            cur.lit(&ToolFormat::Pythonic.markers().end)?;
            Ok(After::Content)
        }
    }
}

#[cfg(test)]
mod tests;
