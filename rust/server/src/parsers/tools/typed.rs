//! Text parameters to JSON by the function's schema, as vLLM does for `qwen3_coder`'s XML
//! values and `pythonic`'s string literals: [`typed`] tries each type the schema lists, on the
//! text trimmed of exactly `" \t\n\r"`. Mirrors `server/parsers/tools/typed.py`.
//! Behaviour: docs/api.md, "Tool calls".

use serde_json::Value;

/// The schema type of parameter `param` in a function's `parameters`.
pub fn param_type<'a>(parameters: Option<&'a Value>, param: &str) -> Option<&'a Value> {
    parameters?.get("properties")?.get(param)?.get("type")
}

/// The characters trimmed before typing (JSON's white space; Python's `str.strip(" \t\n\r")`).
const TRIMMED: &[char] = &[' ', '\t', '\n', '\r'];

/// `s` as JSON text by the schema type `ty`.
pub fn typed(s: &str, ty: Option<&Value>) -> String {
    let listed: Vec<&str> = match ty {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let has = |t: &str| listed.contains(&t);
    let t = s.trim_matches(TRIMMED);
    if has("null") && t == "null" {
        return "null".into();
    }
    if has("integer") && is_integer(t) {
        return t.into();
    }
    if has("number") && is_number(t) {
        return t.into();
    }
    if has("boolean") {
        match t.to_lowercase().as_str() {
            "true" => return "true".into(),
            "false" => return "false".into(),
            _ => {}
        }
    }
    if has("object") || has("array") {
        match serde_json::from_str::<Value>(t) {
            Ok(Value::Object(_)) if has("object") => return t.into(),
            Ok(Value::Array(_)) if has("array") => return t.into(),
            _ => {}
        }
    }
    json_string(s)
}

/// The JSON string of `s`.
pub fn json_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// `-?(0|[1-9][0-9]*)`.
pub fn is_integer(t: &str) -> bool {
    let d = t.strip_prefix('-').unwrap_or(t);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()) && (d == "0" || !d.starts_with('0'))
}

/// The JSON number grammar.
pub fn is_number(t: &str) -> bool {
    let rest = t.strip_prefix('-').unwrap_or(t);
    let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
    if int_len == 0 || (int_len > 1 && rest.starts_with('0')) {
        return false;
    }
    let mut rest = &rest[int_len..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &frac[n..];
    }
    if let Some(exp) = rest.strip_prefix(['e', 'E']) {
        let exp = exp.strip_prefix(['+', '-']).unwrap_or(exp);
        let n = exp.bytes().take_while(u8::is_ascii_digit).count();
        return n > 0 && n == exp.len();
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_follow_the_schema_type() {
        let cases = [
            ("5", json!("integer"), "5"),
            (" 5 ", json!("integer"), "5"),
            ("05", json!("integer"), "\"05\""),
            ("1.5e3", json!("number"), "1.5e3"),
            ("1.", json!("number"), "\"1.\""),
            ("TRUE", json!("boolean"), "true"),
            ("null", json!(["string", "null"]), "null"),
            ("null", json!("string"), "\"null\""),
            ("{\"a\": 1}", json!("object"), "{\"a\": 1}"),
            ("[1, 2]", json!("object"), "\"[1, 2]\""),
            ("[1, 2]", json!(["array", "string"]), "[1, 2]"),
            ("NaN", json!("number"), "\"NaN\""),
            ("7", json!(["integer", "string"]), "7"),
            ("x\n\"é\u{1}", json!("string"), "\"x\\n\\\"é\\u0001\""),
        ];
        for (s, ty, want) in cases {
            assert_eq!(typed(s, Some(&ty)), want, "{s:?} as {ty}");
        }
        assert_eq!(typed("3", None), "\"3\"", "no schema: a string");
        let int = json!("integer");
        assert_eq!(
            typed("\t\r\n 5 \n", Some(&int)),
            "5",
            "JSON white space is trimmed"
        );
        assert_eq!(
            typed("\u{a0}5", Some(&int)),
            "\"\u{a0}5\"",
            "no-break space is not trimmed"
        );
        assert_eq!(
            typed("\u{2003}5\u{2003}", Some(&int)),
            "\"\u{2003}5\u{2003}\"",
            "em space is not trimmed"
        );
        assert_eq!(
            typed(" x ", Some(&int)),
            "\" x \"",
            "the fallback keeps the text"
        );
    }
}
