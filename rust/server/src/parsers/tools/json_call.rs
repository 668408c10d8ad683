//! The incremental scanner of JSON call bodies, shared by the JSON formats (`demo`,
//! `hermes`, `llama3_json`, `mistral`, `granite`, forced JSON), and the cursor every
//! format's grammar reads held text with. Mirrors `server/parsers/tools/json_call.py`.
//!
//! A body is `{` ws `"name"` ws `:` ws STRING ws `,` ws KEY ws `:` ws VALUE ws `}` with KEY
//! `"arguments"` or `"parameters"`. The call is committed at VALUE's first character:
//! `{` streams the raw object text byte for byte until its braces balance (braces inside
//! JSON strings do not count), `"` streams the string's decoded text (an incomplete
//! escape waits for the next piece). Any other VALUE start, a name not in `tools`, or a
//! body that stops matching this shape is not a call. When the first key is not
//! `"name"`, the object is held until its braces balance and parsed whole: a string
//! `name` (in `tools`) with an object or string `arguments` / `parameters` is one call,
//! given in one piece; anything else is not a call.

use serde::Deserialize;
use serde_json::value::RawValue;

/// Why a grammar stopped before deciding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The held text is a prefix of something that may still match: wait.
    Need,
    /// Not this syntax from this byte on.
    Fail(usize),
}

/// How a committed call's text ends (the format's closing syntax).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closer {
    /// ws `}` ws END (`demo`, `hermes`).
    Wrapped(&'static str),
    /// ws `}` ws then `,` (another body) or `]` (`granite`, `mistral` lists, forced JSON).
    List,
    /// ws `}` ws then `;` (another body) or the rest is content (`llama3_json`).
    Llama,
    /// Nothing (`mistral` v11: the arguments object is the end).
    Bare,
    /// ws ```` ``` ```` ws `<｜tool▁call▁end｜>` then the next call or the calls' end.
    Deepseek,
    /// ws `</tool_call>` after `</function>` (`qwen3_coder`).
    Qwen,
    /// ws then `,` (another call) or `]` (`pythonic`).
    Py,
}

/// What a grammar found at a commit point (`at`: byte offset where the call's streamed
/// part starts).
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// A raw JSON object at `at` (its `{`).
    Raw {
        at: usize,
        name: String,
        close: Closer,
    },
    /// A JSON string whose text starts at `at` (after its `"`).
    Str {
        at: usize,
        name: String,
        close: Closer,
    },
    /// A whole call ending at `end` (body's `}` consumed).
    Whole {
        end: usize,
        name: String,
        arguments: String,
        close: Closer,
    },
    /// `qwen3_coder` parameters from `at`.
    Params { at: usize, name: String },
    /// `pythonic` keyword arguments from `at`.
    Kwargs { at: usize, name: String },
}

/// Reads held text from `i` on.
pub struct Cursor<'a> {
    pub s: &'a str,
    pub i: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(s: &'a str) -> Self {
        Self { s, i: 0 }
    }

    pub fn rest(&self) -> &'a str {
        &self.s[self.i..]
    }

    pub fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    /// Skips JSON whitespace.
    pub fn ws(&mut self) {
        let rest = self.rest();
        self.i += rest.len() - rest.trim_start_matches([' ', '\t', '\n', '\r']).len();
    }

    /// `l` next: taken (`true`), not there (`false`), or cut short by the end (`Need`).
    pub fn lit(&mut self, l: &str) -> Result<bool, Stop> {
        let rest = self.rest();
        if rest.starts_with(l) {
            self.i += l.len();
            Ok(true)
        } else if l.starts_with(rest) {
            Err(Stop::Need)
        } else {
            Ok(false)
        }
    }

    /// `l` next, or not this syntax.
    pub fn expect(&mut self, l: &str) -> Result<(), Stop> {
        if self.lit(l)? {
            Ok(())
        } else {
            Err(Stop::Fail(self.i))
        }
    }

    /// The text up to `stop` (taken too).
    pub fn until(&mut self, stop: &str) -> Result<&'a str, Stop> {
        let rest = self.rest();
        let at = rest.find(stop).ok_or(Stop::Need)?;
        self.i += at + stop.len();
        Ok(&rest[..at])
    }

    /// The longest run of chars matching `keep`; `Need` when it reaches the end.
    pub fn take_while(&mut self, keep: impl Fn(char) -> bool) -> Result<&'a str, Stop> {
        let rest = self.rest();
        let n = rest.find(|c| !keep(c)).ok_or(Stop::Need)?;
        self.i += n;
        Ok(&rest[..n])
    }

    /// A JSON string, decoded.
    pub fn string(&mut self) -> Result<String, Stop> {
        let start = self.i;
        match self.peek() {
            None => return Err(Stop::Need),
            Some('"') => {}
            Some(_) => return Err(Stop::Fail(start)),
        }
        let bytes = self.s.as_bytes();
        let mut j = start + 1;
        while j < bytes.len() {
            match bytes[j] {
                b'\\' => j += 2,
                b'"' => {
                    let text =
                        serde_json::from_str(&self.s[start..=j]).map_err(|_| Stop::Fail(start))?;
                    self.i = j + 1;
                    return Ok(text);
                }
                _ => j += 1,
            }
        }
        Err(Stop::Need)
    }
}

/// The byte offset just past the `}` that balances the `{` at `start` (JSON-string aware).
pub fn balanced(s: &str, start: usize) -> Option<usize> {
    let mut scan = ObjScan::default();
    scan.feed(&s[start..]).map(|n| start + n)
}

/// Streaming brace balance of a raw JSON object.
#[derive(Debug, Default, Clone)]
pub struct ObjScan {
    depth: u32,
    in_string: bool,
    escape: bool,
}

impl ObjScan {
    /// Feeds the next text; `Some(n)`: the object ends after `n` bytes of it.
    pub fn feed(&mut self, text: &str) -> Option<usize> {
        for (n, b) in text.bytes().enumerate() {
            if self.in_string {
                match (self.escape, b) {
                    (true, _) => self.escape = false,
                    (false, b'\\') => self.escape = true,
                    (false, b'"') => self.in_string = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b'{' => self.depth += 1,
                b'}' => {
                    self.depth = self.depth.saturating_sub(1);
                    if self.depth == 0 {
                        return Some(n + 1);
                    }
                }
                _ => {}
            }
        }
        None
    }
}

/// Decodes the JSON string text at the start of `s` (after its opening quote):
/// (decoded text, bytes taken, the closing quote was reached). An escape cut by the
/// end of `s` is not taken; an invalid escape is kept as written.
pub fn decode_string(s: &str) -> (String, usize, bool) {
    let mut out = String::new();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return (out, i + 1, true),
            '\\' => {
                let Some(&(_, e)) = chars.peek() else {
                    return (out, i, false);
                };
                chars.next();
                let simple = match e {
                    '"' => Some('"'),
                    '\\' => Some('\\'),
                    '/' => Some('/'),
                    'b' => Some('\u{8}'),
                    'f' => Some('\u{c}'),
                    'n' => Some('\n'),
                    'r' => Some('\r'),
                    't' => Some('\t'),
                    _ => None,
                };
                if let Some(ch) = simple {
                    out.push(ch);
                    continue;
                }
                if e != 'u' {
                    out.push('\\');
                    out.push(e);
                    continue;
                }
                match unicode_escape(&s[i..]) {
                    Some((ch, len)) => {
                        out.push(ch);
                        while chars.peek().is_some_and(|&(j, _)| j < i + len) {
                            chars.next();
                        }
                    }
                    None => return (out, i, false),
                }
            }
            _ => out.push(c),
        }
    }
    (out, s.len(), false)
}

/// `\uXXXX` (with its low surrogate when it is a high one) at the start of `s`:
/// (char, bytes); `None` when `s` ends first.
fn unicode_escape(s: &str) -> Option<(char, usize)> {
    let b = s.as_bytes();
    let hex = |t: &[u8]| {
        std::str::from_utf8(t)
            .ok()
            .filter(|t| t.bytes().all(|c| c.is_ascii_hexdigit()))
            .and_then(|t| u32::from_str_radix(t, 16).ok())
    };
    if b.len() < 6 {
        return None;
    }
    let Some(high) = hex(&b[2..6]) else {
        return Some(('\u{fffd}', 2));
    };
    if !(0xD800..0xDC00).contains(&high) {
        return Some((char::from_u32(high).unwrap_or('\u{fffd}'), 6));
    }
    let tail = &b[6..b.len().min(12)];
    let could_be_low = tail.iter().enumerate().all(|(k, c)| match k {
        0 => *c == b'\\',
        1 => *c == b'u',
        _ => c.is_ascii_hexdigit(),
    });
    if tail.len() < 6 && could_be_low {
        return None;
    }
    match hex(&b[8.min(b.len())..b.len().min(12)]) {
        Some(low) if could_be_low && (0xDC00..0xE000).contains(&low) => {
            let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
            Some((char::from_u32(code).unwrap_or('\u{fffd}'), 12))
        }
        _ => Some(('\u{fffd}', 6)),
    }
}

#[derive(Deserialize)]
struct WholeCall<'a> {
    name: String,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
    #[serde(borrow)]
    parameters: Option<&'a RawValue>,
}

/// `(name, arguments)` of a whole call object: arguments as raw object text, or a
/// string's text.
pub fn parse_whole(body: &str) -> Option<(String, String)> {
    let call: WholeCall<'_> = serde_json::from_str(body).ok()?;
    let raw = call.arguments.or(call.parameters)?.get();
    let arguments = match raw.as_bytes().first() {
        Some(b'{') => raw.to_owned(),
        Some(b'"') => serde_json::from_str::<String>(raw).ok()?,
        _ => return None,
    };
    Some((call.name, arguments))
}

/// A call body from the cursor (at its `{`, maybe after ws) to its commit point.
pub fn body(
    cur: &mut Cursor<'_>,
    known: &dyn Fn(&str) -> bool,
    close: Closer,
) -> Result<Found, Stop> {
    cur.ws();
    let open = cur.i;
    cur.expect("{")?;
    cur.ws();
    let key = cur.string()?;
    if key != "name" {
        let end = balanced(cur.s, open).ok_or(Stop::Need)?;
        return match parse_whole(&cur.s[open..end]) {
            Some((name, arguments)) if known(&name) => Ok(Found::Whole {
                end,
                name,
                arguments,
                close,
            }),
            _ => Err(Stop::Fail(end)),
        };
    }
    cur.ws();
    cur.expect(":")?;
    cur.ws();
    let name = cur.string()?;
    if !known(&name) {
        return Err(Stop::Fail(cur.i));
    }
    cur.ws();
    cur.expect(",")?;
    cur.ws();
    let at = cur.i;
    let key = cur.string()?;
    if key != "arguments" && key != "parameters" {
        return Err(Stop::Fail(at));
    }
    cur.ws();
    cur.expect(":")?;
    cur.ws();
    value(cur, name, close)
}

/// The commit point: VALUE's first character.
pub fn value(cur: &mut Cursor<'_>, name: String, close: Closer) -> Result<Found, Stop> {
    match cur.peek() {
        None => Err(Stop::Need),
        Some('{') => Ok(Found::Raw {
            at: cur.i,
            name,
            close,
        }),
        Some('"') => Ok(Found::Str {
            at: cur.i + 1,
            name,
            close,
        }),
        Some(_) => Err(Stop::Fail(cur.i)),
    }
}
