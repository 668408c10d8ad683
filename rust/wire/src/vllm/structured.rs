//! `StructuredOutputsParams` and `RepetitionDetectionParams`: dataclasses, so maps of
//! every field (private ones included).

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::msgpack::{opt_value, str_values, Any};

/// `RepetitionDetectionParams` (a dataclass).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepetitionDetectionParams {
    /// Largest N-gram checked; 0 disables.
    pub max_pattern_size: i64,
    /// Smallest N-gram checked.
    pub min_pattern_size: i64,
    /// Repetitions that end the request.
    pub min_count: i64,
}

/// `StructuredOutputsParams`: one constraint (json, regex, choice, grammar, json_object or
/// structural_tag) and its options. vLLM writes every field, `None` and private ones included.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct StructuredOutputsParams {
    /// A JSON schema: a JSON string, or a dict (kept as msgpack).
    pub json: Option<Any>,
    /// A regular expression.
    pub regex: Option<String>,
    /// One of these strings.
    pub choice: Option<Vec<String>>,
    /// An EBNF / Lark grammar.
    pub grammar: Option<String>,
    /// Any JSON object.
    pub json_object: Option<bool>,
    /// Option of the json constraints.
    pub disable_any_whitespace: bool,
    /// Option of the json constraints.
    pub disable_additional_properties: bool,
    /// Option of the json constraints.
    pub whitespace_pattern: Option<String>,
    /// A structural tag specification (JSON text).
    pub structural_tag: Option<String>,
    /// Set by vLLM's input processor; msgspec writes this private dataclass field too.
    #[serde(rename = "_backend")]
    pub backend: Option<String>,
    /// Set by vLLM's input processor; written like `_backend`.
    #[serde(rename = "_backend_was_auto")]
    pub backend_was_auto: bool,
}

impl StructuredOutputsParams {
    pub(crate) fn to_value(&self) -> Value {
        let s = |v: &Option<String>| opt_value(v, |x| Value::from(x.as_str()));
        Value::Map(vec![
            ("json".into(), opt_value(&self.json, |a| a.0.clone())),
            ("regex".into(), s(&self.regex)),
            ("choice".into(), opt_value(&self.choice, |c| str_values(c))),
            ("grammar".into(), s(&self.grammar)),
            (
                "json_object".into(),
                opt_value(&self.json_object, |&b| Value::from(b)),
            ),
            (
                "disable_any_whitespace".into(),
                self.disable_any_whitespace.into(),
            ),
            (
                "disable_additional_properties".into(),
                self.disable_additional_properties.into(),
            ),
            ("whitespace_pattern".into(), s(&self.whitespace_pattern)),
            ("structural_tag".into(), s(&self.structural_tag)),
            ("_backend".into(), s(&self.backend)),
            ("_backend_was_auto".into(), self.backend_was_auto.into()),
        ])
    }
}
