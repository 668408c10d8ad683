//! vLLM's removed guided-decoding fields: `guided_json`, `guided_regex`, `guided_choice`,
//! `guided_grammar` and `guided_whitespace_pattern` stand for the `structured_outputs` keys
//! of their names (checked as those, errors naming the guided field);
//! `guided_decoding_backend` is accepted (a string) and ignored. vLLM 0.33 ignores them all
//! with a warning, which leaves the output unconstrained; vrs honours them and logs their
//! deprecation once per process. A guided field next to `response_format` or
//! `structured_outputs` is a 400. Mirrors `server/validate/guided.py`. Behaviour:
//! docs/api.md, "Structured outputs".

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Map, Value};

use super::{one_constraint, structured_outputs_specs, Constraint, RESPONSE_FORMAT, SO};
use crate::edge::error::ApiError;

/// Each guided field and the `structured_outputs` key it stands for, in the order their
/// errors are looked for.
pub const FIELDS: [(&str, &str); 5] = [
    ("guided_json", "json"),
    ("guided_regex", "regex"),
    ("guided_choice", "choice"),
    ("guided_grammar", "grammar"),
    ("guided_whitespace_pattern", "whitespace_pattern"),
];
pub const BACKEND: &str = "guided_decoding_backend";

static WARNED: AtomicBool = AtomicBool::new(false);

/// The once-per-process deprecation warning.
fn deprecated(fields: &[&str]) {
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "request fields {} are vLLM's removed guided decoding: mapped onto \
             structured_outputs (guided_decoding_backend ignored); send structured_outputs or \
             response_format instead (logged once)",
            fields.join(", ")
        );
    }
}

/// Whether `response_format` asks for anything (null and type text do not).
fn is_constraint(response_format: Option<&Value>) -> bool {
    match response_format {
        None | Some(Value::Null) => false,
        Some(value) => value.get("type").and_then(Value::as_str) != Some("text"),
    }
}

/// The guided field standing for `structured_outputs.<key>`.
fn field_of(key: &str) -> &'static str {
    FIELDS
        .iter()
        .find(|(_, k)| *k == key)
        .map_or(SO, |(field, _)| *field)
}

/// An error of the `structured_outputs` checks, naming the guided field instead.
fn renamed(err: ApiError) -> ApiError {
    match err {
        ApiError::BadRequest {
            message,
            param: Some(param),
        } => match param.strip_prefix("structured_outputs.") {
            Some(key) => {
                let field = field_of(key);
                ApiError::bad(
                    field,
                    message.replace(&format!("`{param}"), &format!("`{field}")),
                )
            }
            None => ApiError::bad(param, message),
        },
        other => other,
    }
}

/// The constraint the body's guided fields stand for (`None`: it sets none that
/// constrains), or a 400: a guided field with `response_format` or `structured_outputs`,
/// a `guided_decoding_backend` that is not a string, what the `structured_outputs`
/// checks refuse.
pub fn constraint(body: &Value) -> Result<Option<Constraint>, ApiError> {
    let given: Vec<(&str, &str, &Value)> = FIELDS
        .iter()
        .filter_map(|&(field, key)| {
            body.get(field)
                .filter(|v| !v.is_null())
                .map(|v| (field, key, v))
        })
        .collect();
    let backend = body.get(BACKEND).filter(|v| !v.is_null());
    if !given.is_empty() || backend.is_some() {
        let mut names: Vec<&str> = given.iter().map(|(field, _, _)| *field).collect();
        names.extend(backend.map(|_| BACKEND));
        deprecated(&names);
    }
    if backend.is_some_and(|b| !b.is_string()) {
        return Err(ApiError::bad(
            BACKEND,
            format!("`{BACKEND}` must be a string"),
        ));
    }
    let Some(&(field, key, _)) = given.first() else {
        return Ok(None);
    };
    let structured = body.get(SO).is_some_and(|v| !v.is_null());
    for (other, asks) in [
        (RESPONSE_FORMAT, is_constraint(body.get(RESPONSE_FORMAT))),
        (SO, structured),
    ] {
        if asks {
            return Err(ApiError::bad(
                field,
                format!(
                    "`{field}` cannot be combined with `{other}`: `{field}` is vLLM's removed \
                     name of `structured_outputs.{key}`; send one constraint"
                ),
            ));
        }
    }
    let object: Map<String, Value> = given
        .iter()
        .map(|&(_, key, value)| (key.to_owned(), value.clone()))
        .collect();
    let found = structured_outputs_specs(Some(&Value::Object(object))).map_err(renamed)?;
    let found = found
        .into_iter()
        .map(|c| Constraint {
            name: c
                .name
                .strip_prefix("structured_outputs.")
                .map_or(c.name, field_of),
            spec: c.spec,
        })
        .collect();
    one_constraint(found)
}

#[cfg(test)]
mod tests;
