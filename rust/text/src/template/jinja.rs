//! The jinja environment transformers renders chat templates in, rebuilt on minijinja:
//! trim_blocks + lstrip_blocks, loop controls, transformers' `tojson`, `raise_exception`,
//! `strftime_now`, Python string/dict/list methods (`pymethods`, then pycompat), jinja2's
//! filters where minijinja's differ (`filters`), Python-style printing of booleans, None,
//! tuples, lists and dicts, and a None-safe `length`.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{AutoEscape, Environment, Error, ErrorKind, UndefinedBehavior, Value};

use crate::template::pyjson::{self, DumpOptions};

/// The message of a minijinja error: `raise_exception`'s text verbatim, else the error
/// with its location.
pub(crate) fn describe(err: &Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(raised) = e.downcast_ref::<Raised>() {
            return raised.0.clone();
        }
        source = e.source();
    }
    let mut msg = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(e) = source {
        msg.push_str(": ");
        msg.push_str(&e.to_string());
        source = e.source();
    }
    msg
}

/// The error `raise_exception(message)` raises.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

/// The environment transformers builds: trim_blocks, lstrip_blocks, loop controls, its
/// `tojson`, `raise_exception`, `strftime_now`, Python methods and Python-style printing.
pub(crate) fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    env.set_keep_trailing_newline(false);
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_unknown_method_callback(crate::template::pymethods::unknown_method);
    env.set_formatter(|out, _state, value| {
        if let Some(s) = value.as_str() {
            return out.write_str(s).map_err(Error::from);
        }
        let mut s = String::new();
        pyjson::str_of(&mut s, value)?;
        out.write_str(&s).map_err(Error::from)
    });
    env.add_filter("tojson", tojson);
    env.add_filter("length", length);
    env.add_filter("count", length);
    env.add_filter("string", |v: Value| -> Result<Value, Error> {
        if v.kind() == ValueKind::String {
            return Ok(v);
        }
        let mut s = String::new();
        pyjson::str_of(&mut s, &v)?;
        Ok(Value::from(s))
    });
    env.add_function(
        "raise_exception",
        |message: Value| -> Result<Value, Error> {
            let text = message
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| message.to_string());
            Err(Error::new(ErrorKind::InvalidOperation, text.clone()).with_source(Raised(text)))
        },
    );
    env.add_filter("round", round);
    env.add_function("strftime_now", strftime_now);
    crate::template::filters::register(&mut env);
    env
}

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let arg = |index: usize, name: &str| -> Result<Option<Value>, Error> {
        match (args.get(index), kwargs.get::<Option<Value>>(name)?) {
            (Some(_), Some(_)) => Err(Error::new(
                ErrorKind::TooManyArguments,
                format!("tojson got multiple values for argument {name:?}"),
            )),
            (Some(v), None) => Ok(Some(v.clone())),
            (None, v) => Ok(v),
        }
    };
    let mut options = DumpOptions::default();
    if let Some(v) = arg(0, "ensure_ascii")? {
        options.ensure_ascii = v.is_true();
    }
    if let Some(v) = arg(1, "indent")?.filter(|v| !v.is_none()) {
        options.indent = Some(match (v.as_str(), v.as_i64()) {
            (Some(s), _) => s.to_owned(),
            (_, Some(n)) => " ".repeat(n.max(0) as usize),
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "indent must be int or str",
                ))
            }
        });
    }
    if let Some(v) = arg(2, "separators")?.filter(|v| !v.is_none()) {
        let parts: Vec<Value> = v.try_iter()?.collect();
        match parts.as_slice() {
            [item, key] if item.as_str().is_some() && key.as_str().is_some() => {
                options.separators = Some((
                    item.to_string(),
                    key.as_str().unwrap_or_default().to_owned(),
                ));
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "separators must be (str, str)",
                ))
            }
        }
    }
    if let Some(v) = arg(3, "sort_keys")? {
        options.sort_keys = v.is_true();
    }
    if args.len() > 4 {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "tojson takes at most 4 arguments",
        ));
    }
    kwargs.assert_all_used()?;
    Ok(Value::from(pyjson::dumps(&value, &options)?))
}

/// `length` / `count` that give 0 for none and undefined instead of failing.
fn length(value: Value) -> Result<usize, Error> {
    if value.is_none() || value.is_undefined() {
        return Ok(0);
    }
    value.len().ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("object of type {} has no len()", value.kind()),
        )
    })
}

/// jinja2's `round(value, precision=0, method='common')`: 'common' is Python's `round`
/// (half to even; an integer stays an integer), 'ceil' and 'floor' give floats.
fn round(value: Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let arg = |index: usize, name: &str| -> Result<Option<Value>, Error> {
        Ok(match args.get(index) {
            Some(v) => Some(v.clone()),
            None => kwargs.get::<Option<Value>>(name)?,
        })
    };
    let precision = match arg(0, "precision")? {
        Some(p) => i32::try_from(p)?,
        None => 0,
    };
    let method = arg(1, "method")?;
    let method = method.as_ref().and_then(Value::as_str).unwrap_or("common");
    if args.len() > 2 {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            "round takes at most 2 arguments",
        ));
    }
    kwargs.assert_all_used()?;
    if value.is_integer() && method == "common" && precision >= 0 {
        return Ok(value);
    }
    let x = f64::try_from(value)?;
    if method == "common" && precision >= 0 {
        // Rounds the exact binary value, half to even, like Python's correctly rounded `round`.
        let text = format!("{x:.0$}", precision as usize);
        return Ok(Value::from(text.parse::<f64>().unwrap_or(x)));
    }
    let scale = 10f64.powi(precision);
    let scaled = x * scale;
    let rounded = match method {
        "common" => scaled.round_ties_even(),
        "ceil" => scaled.ceil(),
        "floor" => scaled.floor(),
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("method must be 'common', 'ceil' or 'floor', not {other:?}"),
            ))
        }
    };
    Ok(Value::from(rounded / scale))
}

/// `strftime_now(format)`: local time formatted with Python's `%` codes.
fn strftime_now(format: &str) -> Result<String, Error> {
    use std::fmt::Write;
    let mut out = String::new();
    write!(out, "{}", chrono::Local::now().format(format)).map_err(|_| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("invalid strftime format {format:?}"),
        )
    })?;
    Ok(out)
}

/// Turns transformers' `{% generation %}...{% endgeneration %}` (assistant-mask markers,
/// no effect on the text) into `{% if true %}...{% endif %}`, keeping whitespace control.
pub(crate) fn strip_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        out.push_str(&rest[..start]);
        let tag = &rest[start..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out;
        };
        let inner = &tag[2..end];
        let body = inner
            .trim_start_matches(['-', '+'])
            .trim_end_matches(['-', '+'])
            .trim();
        let replacement = match body {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        match replacement {
            Some(r) => {
                let lead = &inner[..inner.len() - inner.trim_start_matches(['-', '+']).len()];
                let trail = &inner[inner.trim_end_matches(['-', '+']).len()..];
                out.push_str("{%");
                out.push_str(lead);
                out.push(' ');
                out.push_str(r);
                out.push(' ');
                out.push_str(trail);
                out.push_str("%}");
            }
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out
}
