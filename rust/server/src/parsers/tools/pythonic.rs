//! `pythonic` (Llama 3.2 / Llama 4 model cards, vLLM's `pythonic`): the grammar of a Python
//! list of calls, `[` NAME `(` KW `=` LITERAL, ... `)`, ... `]`, committed at `NAME(`, each
//! keyword argument given once the `,` or `)` after it arrives; a top-level string literal is
//! typed by the schema ([`typed`](super::typed)). Mirrors `server/parsers/tools/pythonic.py`.
//! Behaviour: docs/api.md, "Tool calls".

use serde_json::Value;

use super::formats::ToolFormat;
use super::json_call::{Cursor, Found, Stop};
use super::qwen3_coder::at;
use super::typed::{is_number, json_string, param_type, typed};

/// From the output's start (`first`) or a call separator to the commit point.
pub fn pre(cur: &mut Cursor<'_>, first: bool, known: &dyn Fn(&str) -> bool) -> Result<Found, Stop> {
    cur.ws();
    if first {
        if cur.lit(&ToolFormat::Pythonic.markers().begin)? {
            cur.ws();
        }
        cur.expect("[")?;
        cur.ws();
    }
    let start = cur.i;
    let name = cur.take_while(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')?;
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        return Err(Stop::Fail(start));
    }
    cur.ws();
    cur.expect("(")?;
    if !known(name) {
        return Err(Stop::Fail(cur.i));
    }
    Ok(Found::Kwargs {
        at: cur.i,
        name: name.to_owned(),
    })
}

/// What comes next in a committed call.
#[derive(Debug, PartialEq)]
pub enum Item {
    /// `"KW": V`.
    Arg(String),
    /// The `,` after an argument.
    Sep,
    /// `)`.
    End,
}

/// The next element of a call's argument list (`after_arg`: an argument was just read).
pub fn item(
    cur: &mut Cursor<'_>,
    after_arg: bool,
    parameters: Option<&Value>,
) -> Result<Item, Stop> {
    cur.ws();
    if cur.lit(")")? {
        return Ok(Item::End);
    }
    if after_arg {
        cur.expect(",")?;
        return Ok(Item::Sep);
    }
    let start = cur.i;
    let arg = (|| {
        let kw = cur.take_while(|c| c.is_ascii_alphanumeric() || c == '_')?;
        if !kw.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            return Err(Stop::Fail(start));
        }
        cur.ws();
        cur.expect("=")?;
        cur.ws();
        let value = match literal(cur)? {
            Lit::Str(s) => typed(&s, param_type(parameters, kw)),
            Lit::Json(j) => j,
        };
        // The argument stands only once its `,` or `)` follows (left for the next item).
        cur.ws();
        if !matches!(cur.peek().ok_or(Stop::Need)?, ',' | ')') {
            return Err(Stop::Fail(start));
        }
        Ok(format!("{}: {value}", json_string(kw)))
    })()
    .map_err(|e| at(e, start))?;
    Ok(Item::Arg(arg))
}

/// A literal: a string's text, or any other literal's JSON.
#[derive(Debug, PartialEq)]
pub enum Lit {
    Str(String),
    Json(String),
}

impl Lit {
    fn json(self) -> String {
        match self {
            Self::Str(s) => json_string(&s),
            Self::Json(j) => j,
        }
    }
}

/// The literal at the cursor.
pub fn literal(cur: &mut Cursor<'_>) -> Result<Lit, Stop> {
    let start = cur.i;
    match cur.peek().ok_or(Stop::Need)? {
        q @ ('\'' | '"') => string(cur, q).map(Lit::Str),
        open @ ('[' | '(') => {
            let close = if open == '[' { "]" } else { ")" };
            cur.i += 1;
            let mut items = Vec::new();
            loop {
                cur.ws();
                if cur.lit(close)? {
                    break;
                }
                items.push(literal(cur)?.json());
                cur.ws();
                if !cur.lit(",")? {
                    cur.expect(close)?;
                    break;
                }
            }
            Ok(Lit::Json(format!("[{}]", items.join(", "))))
        }
        '{' => {
            cur.i += 1;
            let mut items = Vec::new();
            loop {
                cur.ws();
                if cur.lit("}")? {
                    break;
                }
                let q = cur.peek().ok_or(Stop::Need)?;
                if q != '\'' && q != '"' {
                    return Err(Stop::Fail(cur.i));
                }
                let key = json_string(&string(cur, q)?);
                cur.ws();
                cur.expect(":")?;
                cur.ws();
                items.push(format!("{key}: {}", literal(cur)?.json()));
                cur.ws();
                if !cur.lit(",")? {
                    cur.expect("}")?;
                    break;
                }
            }
            Ok(Lit::Json(format!("{{{}}}", items.join(", "))))
        }
        c if c == '-' || c.is_ascii_digit() => {
            let n = cur.take_while(|c| c.is_ascii_digit() || "+-.eE".contains(c))?;
            if is_number(n) {
                Ok(Lit::Json(n.to_owned()))
            } else {
                Err(Stop::Fail(start))
            }
        }
        c if c.is_ascii_alphabetic() => {
            match cur.take_while(|c| c.is_ascii_alphanumeric() || c == '_')? {
                "True" => Ok(Lit::Json("true".into())),
                "False" => Ok(Lit::Json("false".into())),
                "None" => Ok(Lit::Json("null".into())),
                _ => Err(Stop::Fail(start)),
            }
        }
        _ => Err(Stop::Fail(start)),
    }
}

/// A quoted string (quote `q`), decoded.
fn string(cur: &mut Cursor<'_>, q: char) -> Result<String, Stop> {
    let start = cur.i;
    let mut out = String::new();
    let mut chars = cur.rest().char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\n' => return Err(Stop::Fail(start)),
            c if c == q => {
                cur.i += i + c.len_utf8();
                return Ok(out);
            }
            '\\' => {
                let (_, e) = chars.next().ok_or(Stop::Need)?;
                let hex_len = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 0,
                };
                if hex_len == 0 {
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '\\' | '\'' | '"' => out.push(e),
                        _ => {
                            out.push('\\');
                            out.push(e);
                        }
                    }
                    continue;
                }
                let mut code = 0u32;
                for _ in 0..hex_len {
                    let (_, h) = chars.next().ok_or(Stop::Need)?;
                    code = code * 16 + h.to_digit(16).ok_or(Stop::Fail(start))?;
                }
                out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
            }
            c => out.push(c),
        }
    }
    Err(Stop::Need)
}
