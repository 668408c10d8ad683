//! jinja2 filters and tests that minijinja lacks or implements differently, with
//! jinja2's arguments and results: `center`, `wordcount`, `truncate`, `replace` (with a
//! count), `int` / `float` (with defaults), `sum` (attribute, start), `dictsort` and
//! `items` (tuples), `filesizeformat`, `striptags`, `urlencode`, `indent` (a trailing
//! newline kept), and the `sequence` test.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Value};

use crate::template::pyjson;
use crate::template::pymethods::{items as map_items, justify};

/// Adds the filters and tests to `env` (replacing minijinja's of the same name).
pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_filter("center", |s: &str, width: Option<usize>| {
        justify(s, "center", width.unwrap_or(80), ' ')
    });
    env.add_filter("wordcount", wordcount);
    env.add_filter("truncate", truncate);
    env.add_filter("replace", replace);
    env.add_filter("int", int);
    env.add_filter("float", float);
    env.add_filter("sum", sum);
    env.add_filter("dictsort", dictsort);
    env.add_filter("items", items);
    env.add_filter("filesizeformat", minijinja_contrib::filters::filesizeformat);
    env.add_filter("striptags", minijinja_contrib::filters::striptags);
    env.add_filter("urlencode", urlencode);
    env.add_filter("indent", indent);
    env.add_test("sequence", |v: Value| {
        matches!(
            v.kind(),
            ValueKind::String | ValueKind::Seq | ValueKind::Map
        )
    });
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

/// Positional argument `index`, else keyword `name`.
fn arg(
    args: &Rest<Value>,
    kwargs: &Kwargs,
    index: usize,
    name: &str,
) -> Result<Option<Value>, Error> {
    match args.get(index) {
        Some(v) => Ok(Some(v.clone())),
        None => kwargs.get::<Option<Value>>(name),
    }
}

fn done(args: &Rest<Value>, most: usize, kwargs: &Kwargs, name: &str) -> Result<(), Error> {
    if args.len() > most {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            format!("{name} takes at most {most} arguments"),
        ));
    }
    kwargs.assert_all_used()
}

/// Python's `str(value)` (strings as they are).
fn text(value: &Value) -> Result<String, Error> {
    if let Some(s) = value.as_str() {
        return Ok(s.to_owned());
    }
    let mut out = String::new();
    pyjson::str_of(&mut out, value)?;
    Ok(out)
}

/// Python's `str.splitlines()`: the line boundaries it knows, `\r\n` as one.
fn splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end = match c {
            '\r' if matches!(chars.peek(), Some((_, '\n'))) => {
                chars.next();
                i + 2
            }
            '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => i + c.len_utf8(),
            _ => continue,
        };
        lines.push(&s[start..i]);
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// jinja2's `indent(width=4, first=False, blank=False)`: `width` spaces or a string;
/// minijinja's drops a trailing newline, jinja2's keeps it (`'{\n' | indent(4)`).
fn indent(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<String, Error> {
    let Some(s) = value.as_str() else {
        return Err(invalid(format!(
            "indent expects a string, not {}",
            value.kind()
        )));
    };
    let indention = match arg(&args, &kwargs, 0, "width")? {
        None => "    ".to_owned(),
        Some(w) => match w.as_str() {
            Some(text) => text.to_owned(),
            None => " ".repeat(
                usize::try_from(w.as_i64().ok_or_else(|| {
                    invalid(format!(
                        "indent width must be an integer or a string, not {}",
                        w.kind()
                    ))
                })?)
                .unwrap_or(0),
            ),
        },
    };
    let first = arg(&args, &kwargs, 1, "first")?.is_some_and(|v| v.is_true());
    let blank = arg(&args, &kwargs, 2, "blank")?.is_some_and(|v| v.is_true());
    done(&args, 3, &kwargs, "indent")?;
    let padded = format!("{s}\n");
    let lines = splitlines(&padded);
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            if blank || !line.is_empty() {
                out.push_str(&indention);
            }
        }
        out.push_str(line);
    }
    if first {
        out.insert_str(0, &indention);
    }
    Ok(out)
}

/// Runs of word characters (`\w+`).
fn wordcount(s: &str) -> usize {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut count = 0;
    let mut in_word = false;
    for c in s.chars() {
        if word(c) && !in_word {
            count += 1;
        }
        in_word = word(c);
    }
    count
}

/// `truncate(s, length=255, killwords=False, end='...', leeway=5)`.
fn truncate(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let s = text(&value)?;
    let length = match arg(&args, &kwargs, 0, "length")? {
        Some(v) => usize::try_from(v)?,
        None => 255,
    };
    let killwords = arg(&args, &kwargs, 1, "killwords")?.is_some_and(|v| v.is_true());
    let end = match arg(&args, &kwargs, 2, "end")? {
        Some(v) => text(&v)?,
        None => "...".to_owned(),
    };
    let leeway = match arg(&args, &kwargs, 3, "leeway")? {
        Some(v) if !v.is_none() => usize::try_from(v)?,
        _ => 5,
    };
    done(&args, 4, &kwargs, "truncate")?;
    let end_len = end.chars().count();
    if length < end_len {
        return Err(invalid(format!(
            "expected length >= {end_len}, got {length}"
        )));
    }
    if s.chars().count() <= length + leeway {
        return Ok(Value::from(s));
    }
    let head: String = s.chars().take(length - end_len).collect();
    if killwords {
        return Ok(Value::from(head + &end));
    }
    let kept = head
        .rsplit_once(' ')
        .map_or(head.as_str(), |(before, _)| before);
    Ok(Value::from(format!("{kept}{end}")))
}

/// `replace(s, old, new, count=None)`: Python's `str.replace`.
fn replace(value: Value, old: Value, new: Value, count: Option<Value>) -> Result<String, Error> {
    let (s, old, new) = (text(&value)?, text(&old)?, text(&new)?);
    Ok(
        match count
            .filter(|c| !c.is_none())
            .map(i64::try_from)
            .transpose()?
        {
            Some(n) if n >= 0 => s.replacen(&old, &new, n as usize),
            _ => s.replace(&old, &new),
        },
    )
}

/// Python's `float(str)`: surrounding whitespace and `_` between digits allowed.
fn parse_float(s: &str) -> Option<f64> {
    let s = s.trim();
    let cleaned = s.replace('_', "");
    if cleaned.len() != s.len() && (s.starts_with('_') || s.ends_with('_') || s.contains("__")) {
        return None;
    }
    cleaned.parse().ok()
}

/// `float(value, default=0.0)`.
fn float(value: Value, default: Option<Value>) -> Value {
    let parsed = match value.kind() {
        ValueKind::Bool => Some(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(value).ok(),
        ValueKind::String => parse_float(value.as_str().unwrap_or_default()),
        _ => None,
    };
    parsed.map_or_else(|| default.unwrap_or(Value::from(0.0)), Value::from)
}

/// `int(value, default=0, base=10)`: a string in `base`, else via `float`, else default.
fn int(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = arg(&args, &kwargs, 0, "default")?.unwrap_or(Value::from(0));
    let base = match arg(&args, &kwargs, 1, "base")? {
        Some(v) => u32::try_from(v)?,
        None => 10,
    };
    done(&args, 2, &kwargs, "int")?;
    let as_int = match value.kind() {
        ValueKind::Bool => Some(i128::from(value.is_true())),
        ValueKind::Number if value.is_integer() => i128::try_from(value.clone()).ok(),
        ValueKind::Number => f64::try_from(value.clone()).ok().and_then(truncate_float),
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default().trim().replace('_', "");
            let (negative, digits) = match s.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, s.strip_prefix('+').unwrap_or(&s)),
            };
            let digits = match base {
                16 => digits
                    .strip_prefix("0x")
                    .or(digits.strip_prefix("0X"))
                    .unwrap_or(digits),
                8 => digits
                    .strip_prefix("0o")
                    .or(digits.strip_prefix("0O"))
                    .unwrap_or(digits),
                2 => digits
                    .strip_prefix("0b")
                    .or(digits.strip_prefix("0B"))
                    .unwrap_or(digits),
                _ => digits,
            };
            (2..=36)
                .contains(&base)
                .then(|| i128::from_str_radix(digits, base).ok())
                .flatten()
                .filter(|_| !digits.starts_with(['+', '-']))
                .map(|n| if negative { -n } else { n })
                .or_else(|| parse_float(&s).and_then(truncate_float))
        }
        _ => None,
    };
    Ok(as_int.map_or(default, Value::from))
}

fn truncate_float(f: f64) -> Option<i128> {
    f.is_finite().then_some(f.trunc() as i128)
}

/// Follows a jinja2 attribute path (`a.b.0`) from `item`.
fn attribute(item: &Value, path: &str) -> Result<Value, Error> {
    let mut current = item.clone();
    for part in path.split('.') {
        current = match part.parse::<i64>() {
            Ok(i) => current.get_item(&Value::from(i))?,
            Err(_) => current.get_attr(part)?,
        };
    }
    Ok(current)
}

/// `sum(iterable, attribute=None, start=0)` over numbers.
fn sum(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let attr = arg(&args, &kwargs, 0, "attribute")?.filter(|a| !a.is_none());
    let start = arg(&args, &kwargs, 1, "start")?.unwrap_or(Value::from(0));
    done(&args, 2, &kwargs, "sum")?;
    let (mut int_total, mut float_total, mut is_float) = (0i128, 0f64, false);
    let path = attr.map(|a| text(&a)).transpose()?;
    let mut values = vec![start];
    for item in value.try_iter()? {
        values.push(match &path {
            Some(path) => attribute(&item, path)?,
            None => item,
        });
    }
    for item in values {
        match item.kind() {
            ValueKind::Number | ValueKind::Bool
                if item.is_integer() || item.kind() == ValueKind::Bool =>
            {
                int_total += i128::try_from(item).unwrap_or(0);
            }
            ValueKind::Number => {
                is_float = true;
                float_total += f64::try_from(item)?;
            }
            kind => {
                return Err(invalid(format!(
                    "unsupported operand type(s) for +: 'int' and '{kind}'"
                )))
            }
        }
    }
    Ok(if is_float {
        Value::from(float_total + int_total as f64)
    } else {
        Value::from(int_total)
    })
}

/// `dictsort(value, case_sensitive=False, by='key', reverse=False)`: `(key, value)` tuples.
fn dictsort(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    if value.kind() != ValueKind::Map {
        return Err(invalid("dictsort expects a mapping"));
    }
    let case_sensitive = arg(&args, &kwargs, 0, "case_sensitive")?.is_some_and(|v| v.is_true());
    let by = match arg(&args, &kwargs, 1, "by")? {
        Some(v) => text(&v)?,
        None => "key".to_owned(),
    };
    let position = match by.as_str() {
        "key" => 0,
        "value" => 1,
        _ => return Err(invalid("You can only sort by either 'key' or 'value'")),
    };
    let reverse = arg(&args, &kwargs, 2, "reverse")?.is_some_and(|v| v.is_true());
    done(&args, 3, &kwargs, "dictsort")?;
    let sort_key = |pair: &Value| -> Value {
        let v = pair.get_item(&Value::from(position)).unwrap_or_default();
        match (case_sensitive, v.as_str()) {
            (false, Some(s)) => Value::from(s.to_lowercase()),
            _ => v,
        }
    };
    let mut pairs: Vec<Value> = map_items(&value)?.try_iter()?.collect();
    pairs.sort_by(|a, b| {
        let ordering = sort_key(a).cmp(&sort_key(b));
        if reverse {
            ordering.reverse()
        } else {
            ordering
        }
    });
    Ok(Value::from(pairs))
}

/// `items(value)`: a mapping's `(key, value)` tuples; nothing for undefined.
fn items(value: Value) -> Result<Value, Error> {
    match value.kind() {
        ValueKind::Map => map_items(&value),
        ValueKind::Undefined => Ok(Value::from(Vec::<Value>::new())),
        _ => Err(invalid("Can only get item pairs from a mapping.")),
    }
}

/// Python's `quote` (`safe` kept as is; `+` for spaces in query strings).
fn quote(out: &mut String, s: &str, for_query: bool) {
    for byte in s.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => {
                out.push(char::from(byte));
            }
            b'/' if !for_query => out.push('/'),
            b' ' if for_query => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
}

/// `urlencode(value)`: a quoted string, or `k=v&...` for a mapping or pairs.
fn urlencode(value: Value) -> Result<String, Error> {
    let mut out = String::new();
    if let Some(s) = value.as_str() {
        quote(&mut out, s, false);
        return Ok(out);
    }
    let pairs: Vec<Value> = match value.kind() {
        ValueKind::Map => map_items(&value)?.try_iter()?.collect(),
        ValueKind::Seq | ValueKind::Iterable => value.try_iter()?.collect(),
        _ => {
            quote(&mut out, &text(&value)?, false);
            return Ok(out);
        }
    };
    for (i, pair) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        quote(&mut out, &text(&pair.get_item(&Value::from(0))?)?, true);
        out.push('=');
        quote(&mut out, &text(&pair.get_item(&Value::from(1))?)?, true);
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
