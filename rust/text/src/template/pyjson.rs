//! Python's `json.dumps` and `repr` for template values, so that rendered prompts match
//! transformers' jinja2 environment byte for byte.

use std::fmt::Write;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

use crate::template::tuple::Tuple;

/// Options of Python's `json.dumps` that transformers' `tojson` exposes.
#[derive(Debug, Clone, Default)]
pub(crate) struct DumpOptions {
    /// Escape every non-ASCII character as `\uXXXX`.
    pub ensure_ascii: bool,
    /// Pretty-print with this indent string (Python's `indent`).
    pub indent: Option<String>,
    /// `(item_separator, key_separator)`; default `(", ", ": ")`, or `(",", ": ")` with an indent.
    pub separators: Option<(String, String)>,
    /// Sort object keys.
    pub sort_keys: bool,
}

/// `json.dumps(value, **options)`.
pub(crate) fn dumps(value: &Value, options: &DumpOptions) -> Result<String, Error> {
    let (item_sep, key_sep) = match &options.separators {
        Some((i, k)) => (i.as_str(), k.as_str()),
        None if options.indent.is_some() => (",", ": "),
        None => (", ", ": "),
    };
    let mut w = Dumper {
        out: String::new(),
        options,
        item_sep,
        key_sep,
    };
    w.value(value, 0)?;
    Ok(w.out)
}

struct Dumper<'a> {
    out: String,
    options: &'a DumpOptions,
    item_sep: &'a str,
    key_sep: &'a str,
}

impl Dumper<'_> {
    fn value(&mut self, value: &Value, level: usize) -> Result<(), Error> {
        match value.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => number(&mut self.out, value, true),
            ValueKind::String => string(&mut self.out, value.as_str().unwrap_or(""), self.options),
            ValueKind::Seq | ValueKind::Iterable => {
                let items: Vec<Value> = value.try_iter()?.collect();
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    self.separator(i, level);
                    self.value(item, level + 1)?;
                }
                self.close(']', items.is_empty(), level);
            }
            ValueKind::Map => {
                let mut pairs = Vec::new();
                for key in value.try_iter()? {
                    let item = value.get_item(&key)?;
                    pairs.push((key_string(&key)?, item));
                }
                if self.options.sort_keys {
                    pairs.sort_by(|a, b| a.0.cmp(&b.0));
                }
                self.out.push('{');
                for (i, (key, item)) in pairs.iter().enumerate() {
                    self.separator(i, level);
                    string(&mut self.out, key, self.options);
                    self.out.push_str(self.key_sep);
                    self.value(item, level + 1)?;
                }
                self.close('}', pairs.is_empty(), level);
            }
            kind => {
                let name = if kind == ValueKind::Undefined {
                    "Undefined"
                } else {
                    "object"
                };
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("Object of type {name} is not JSON serializable"),
                ));
            }
        }
        Ok(())
    }

    fn separator(&mut self, index: usize, level: usize) {
        if index > 0 {
            self.out.push_str(self.item_sep);
        }
        if let Some(indent) = &self.options.indent {
            self.out.push('\n');
            for _ in 0..=level {
                self.out.push_str(indent);
            }
        }
    }

    fn close(&mut self, bracket: char, empty: bool, level: usize) {
        if let (Some(indent), false) = (&self.options.indent, empty) {
            self.out.push('\n');
            for _ in 0..level {
                self.out.push_str(indent);
            }
        }
        self.out.push(bracket);
    }
}

/// A JSON object key the way `json.dumps` converts it.
fn key_string(key: &Value) -> Result<String, Error> {
    match key.kind() {
        ValueKind::String => Ok(key.as_str().unwrap_or("").to_owned()),
        ValueKind::Bool => Ok(if key.is_true() { "true" } else { "false" }.to_owned()),
        ValueKind::None => Ok("null".to_owned()),
        ValueKind::Number => {
            let mut s = String::new();
            number(&mut s, key, true);
            Ok(s)
        }
        kind => Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("keys must be str, int, float, bool or None, not {kind}"),
        )),
    }
}

/// An integer as Python prints it, or a float as `repr` (json: NaN/Infinity spelling).
fn number(out: &mut String, value: &Value, json: bool) {
    if value.is_integer() {
        let _ = write!(out, "{value}");
        return;
    }
    let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
    float_repr(out, f, json);
}

/// Python's `repr(float)`: shortest round-trip digits, scientific below 1e-4 and from 1e16.
pub(crate) fn float_repr(out: &mut String, f: f64, json: bool) {
    if f.is_nan() {
        out.push_str(if json { "NaN" } else { "nan" });
        return;
    }
    if f.is_infinite() {
        let s = match (json, f > 0.0) {
            (true, true) => "Infinity",
            (true, false) => "-Infinity",
            (false, true) => "inf",
            (false, false) => "-inf",
        };
        out.push_str(s);
        return;
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if f != 0.0 && !(-4..16).contains(&exp) {
        let _ = write!(
            out,
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        );
    } else {
        let start = out.len();
        let _ = write!(out, "{f}");
        if !out[start..].contains('.') {
            out.push_str(".0");
        }
    }
}

/// A JSON string literal as Python's `json` encoder writes it.
fn string(out: &mut String, s: &str, options: &DumpOptions) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if options.ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr` of a value (what jinja2 prints for lists and dicts).
pub(crate) fn repr(out: &mut String, value: &Value) -> Result<(), Error> {
    match value.kind() {
        ValueKind::String => string_repr(out, value.as_str().unwrap_or("")),
        _ => str_of(out, value)?,
    }
    Ok(())
}

/// Python's `str` of a value: `True`, `None`, `1.0`, `['a', 1]`, `{'k': None}`.
pub(crate) fn str_of(out: &mut String, value: &Value) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => number(out, value, false),
        ValueKind::Seq if value.downcast_object_ref::<Tuple>().is_some() => {
            out.push('(');
            let items: Vec<Value> = value.try_iter()?.collect();
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(out, item)?;
            }
            out.push_str(if items.len() == 1 { ",)" } else { ")" });
        }
        ValueKind::Seq => {
            out.push('[');
            for (i, item) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(out, &item)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                repr(out, &key)?;
                out.push_str(": ");
                repr(out, &value.get_item(&key)?)?;
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{value}");
        }
    }
    Ok(())
}

/// Python's `repr(str)`: single quotes unless the text has `'` and no `"`.
fn string_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dump(json: serde_json::Value, options: &DumpOptions) -> String {
        dumps(&Value::from_serialize(&json), options).unwrap()
    }

    #[test]
    fn floats_like_python_repr() {
        let cases = [
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (123456789.125, "123456789.125"),
            (1e300, "1e+300"),
            (2.5e-300, "2.5e-300"),
        ];
        for (f, want) in cases {
            let mut s = String::new();
            float_repr(&mut s, f, true);
            assert_eq!(s, want, "{f}");
        }
    }

    #[test]
    fn dumps_like_transformers_tojson() {
        let v = serde_json::json!({"b": [1, 2.0, null, true], "a": "日本 \"q\" <x>\n\u{1}", "e": {}, "l": []});
        let compact = dump(v.clone(), &DumpOptions::default());
        assert_eq!(
            compact,
            r#"{"b": [1, 2.0, null, true], "a": "日本 \"q\" <x>\n\u0001", "e": {}, "l": []}"#
        );
        let opts = DumpOptions {
            indent: Some("  ".into()),
            sort_keys: true,
            ..Default::default()
        };
        assert_eq!(
            dump(serde_json::json!({"b": [1], "a": {}}), &opts),
            "{\n  \"a\": {},\n  \"b\": [\n    1\n  ]\n}"
        );
        let ascii = DumpOptions {
            ensure_ascii: true,
            ..Default::default()
        };
        assert_eq!(
            dump(serde_json::json!("é🦀\u{7f}"), &ascii),
            r#""\u00e9\ud83e\udd80\u007f""#
        );
        assert!(dumps(&Value::UNDEFINED, &DumpOptions::default()).is_err());
    }

    #[test]
    fn str_like_python() {
        let v = Value::from_serialize(serde_json::json!(["it's", "a", 1.0, null, true, {"k": 2}]));
        let mut s = String::new();
        str_of(&mut s, &v).unwrap();
        assert_eq!(s, r#"["it's", 'a', 1.0, None, True, {'k': 2}]"#);
    }
}
