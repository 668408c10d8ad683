//! Python methods of `str`, `dict` and `list` that HF chat templates call and
//! minijinja-contrib's pycompat lacks (or gets wrong for non-ASCII text). The pairs of
//! `dict.items()` and `dictsort` are [`Tuple`]s. Everything else falls through to
//! pycompat.

use minijinja::value::{from_args, ValueKind};

use crate::template::tuple::Tuple;
use minijinja::{Error, ErrorKind, State, Value};

/// The environment's unknown-method callback: ours first, then pycompat's.
pub(crate) fn unknown_method(
    state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let ours = match value.kind() {
        ValueKind::String => string_method(value.as_str().unwrap_or_default(), method, args),
        ValueKind::Map => map_method(value, method, args),
        ValueKind::Seq => seq_method(value, method, args),
        _ => None,
    };
    match ours {
        Some(result) => result,
        None => minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args),
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Characters before byte offset `at` (Python indexes strings by code point).
fn char_index(s: &str, at: usize) -> i64 {
    s[..at].chars().count() as i64
}

fn string_method(s: &str, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    let result = match method {
        "find" | "rfind" | "index" | "rindex" => find(s, method, args),
        "rsplit" => rsplit(s, args),
        "partition" | "rpartition" => partition(s, method == "rpartition", args),
        "zfill" => from_args(args).map(|(width,): (usize,)| Value::from(zfill(s, width))),
        "ljust" | "rjust" | "center" => {
            from_args(args).and_then(|(width, fill): (usize, Option<&str>)| {
                let fill = fill_char(fill)?;
                Ok(Value::from(justify(s, method, width, fill)))
            })
        }
        "casefold" => from_args(args).map(|()| Value::from(s.to_lowercase().replace('ß', "ss"))),
        "swapcase" => from_args(args).map(|()| Value::from(swapcase(s))),
        "istitle" => from_args(args).map(|()| Value::from(istitle(s))),
        "removeprefix" => {
            from_args(args).map(|(p,): (&str,)| Value::from(s.strip_prefix(p).unwrap_or(s)))
        }
        "removesuffix" => {
            from_args(args).map(|(p,): (&str,)| Value::from(s.strip_suffix(p).unwrap_or(s)))
        }
        "expandtabs" => from_args(args)
            .map(|(size,): (Option<usize>,)| Value::from(expandtabs(s, size.unwrap_or(8)))),
        _ => return None,
    };
    Some(result)
}

fn find(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let (sub,): (&str,) = from_args(args)?;
    let at = if method.starts_with('r') {
        s.rfind(sub)
    } else {
        s.find(sub)
    };
    match (at, method) {
        (Some(at), _) => Ok(Value::from(char_index(s, at))),
        (None, "find" | "rfind") => Ok(Value::from(-1)),
        (None, _) => Err(invalid("substring not found")),
    }
}

/// `str.rsplit(sep=None, maxsplit=-1)`.
fn rsplit(s: &str, args: &[Value]) -> Result<Value, Error> {
    let (sep, maxsplit): (Option<&str>, Option<i64>) = from_args(args)?;
    let limit = maxsplit.filter(|&m| m >= 0).map(|m| m as usize);
    let mut parts: Vec<&str> = Vec::new();
    match sep {
        Some("") => return Err(invalid("empty separator")),
        Some(sep) => {
            let pieces: Vec<&str> = match limit {
                Some(m) => s.rsplitn(m + 1, sep).collect(),
                None => s.rsplit(sep).collect(),
            };
            parts.extend(pieces);
        }
        None => {
            let mut rest = s.trim_end();
            while !rest.is_empty() {
                if limit == Some(parts.len()) {
                    parts.push(rest);
                    break;
                }
                match rest.char_indices().rev().find(|(_, c)| c.is_whitespace()) {
                    None => {
                        parts.push(rest);
                        break;
                    }
                    Some((i, c)) => {
                        parts.push(&rest[i + c.len_utf8()..]);
                        rest = rest[..i].trim_end();
                    }
                }
            }
        }
    }
    parts.reverse();
    Ok(Value::from_iter(parts.into_iter().map(Value::from)))
}

fn partition(s: &str, from_right: bool, args: &[Value]) -> Result<Value, Error> {
    let (sep,): (&str,) = from_args(args)?;
    if sep.is_empty() {
        return Err(invalid("empty separator"));
    }
    let at = if from_right {
        s.rfind(sep)
    } else {
        s.find(sep)
    };
    let parts = match at {
        Some(i) => [&s[..i], sep, &s[i + sep.len()..]],
        None if from_right => ["", "", s],
        None => [s, "", ""],
    };
    Ok(Tuple::value(
        parts.iter().map(|p| Value::from(*p)).collect(),
    ))
}

fn zfill(s: &str, width: usize) -> String {
    let len = s.chars().count();
    if len >= width {
        return s.to_owned();
    }
    let (sign, digits) = match s.strip_prefix(['+', '-']) {
        Some(rest) => (&s[..1], rest),
        None => ("", s),
    };
    format!("{sign}{}{digits}", "0".repeat(width - len))
}

fn fill_char(fill: Option<&str>) -> Result<char, Error> {
    let Some(fill) = fill else { return Ok(' ') };
    let mut chars = fill.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(invalid(
            "The fill character must be exactly one character long",
        )),
    }
}

/// `str.ljust` / `str.rjust` / `str.center` (CPython's split of an odd margin).
pub(crate) fn justify(s: &str, how: &str, width: usize, fill: char) -> String {
    let len = s.chars().count();
    if len >= width {
        return s.to_owned();
    }
    let margin = width - len;
    let left = match how {
        "ljust" => 0,
        "rjust" => margin,
        _ => margin / 2 + (margin & width & 1),
    };
    let fill = fill.to_string();
    format!("{}{s}{}", fill.repeat(left), fill.repeat(margin - left))
}

fn swapcase(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_uppercase() {
            out.extend(c.to_lowercase());
        } else if c.is_lowercase() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn istitle(s: &str) -> bool {
    let (mut cased, mut previous_cased) = (false, false);
    for c in s.chars() {
        if c.is_uppercase() {
            if previous_cased {
                return false;
            }
            (previous_cased, cased) = (true, true);
        } else if c.is_lowercase() {
            if !previous_cased {
                return false;
            }
            (previous_cased, cased) = (true, true);
        } else {
            previous_cased = false;
        }
    }
    cased
}

fn expandtabs(s: &str, size: usize) -> String {
    let mut out = String::with_capacity(s.len());
    let mut column = 0;
    for c in s.chars() {
        match c {
            '\t' if size > 0 => {
                let n = size - column % size;
                out.push_str(&" ".repeat(n));
                column += n;
            }
            '\t' => {}
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            c => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

fn map_method(value: &Value, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    let result = match method {
        "items" => from_args(args).and_then(|()| items(value)),
        "copy" => from_args(args).map(|()| value.clone()),
        _ => return None,
    };
    Some(result)
}

/// A mapping's `(key, value)` tuples, in order.
pub(crate) fn items(map: &Value) -> Result<Value, Error> {
    let mut out = Vec::new();
    for key in map.try_iter()? {
        let item = map.get_item(&key)?;
        out.push(Tuple::value(vec![key, item]));
    }
    Ok(Value::from(out))
}

fn seq_method(value: &Value, method: &str, args: &[Value]) -> Option<Result<Value, Error>> {
    if method != "index" {
        return None;
    }
    Some(from_args(args).and_then(|(wanted,): (Value,)| {
        match value.try_iter()?.position(|item| item == wanted) {
            Some(i) => Ok(Value::from(i)),
            None => {
                let mut shown = String::new();
                crate::template::pyjson::repr(&mut shown, &wanted)?;
                Err(invalid(format!("{shown} is not in list")))
            }
        }
    }))
}
