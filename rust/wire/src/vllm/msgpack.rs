//! Reading and writing msgpack values the way msgspec does, with errors that name the
//! struct and field that was malformed.

use rmpv::Value;
use serde::de::{self, Deserializer};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use super::VllmWireError;

/// Deepest nesting a decoded message may have (vLLM's messages nest a handful deep).
const MAX_DEPTH: usize = 64;

/// Where a value sits: `("EngineCoreOutput", "new_token_ids")`.
pub(crate) type At = (&'static str, &'static str);

/// Decodes exactly one msgpack value from `bytes` (trailing bytes are an error).
pub(crate) fn read_one(bytes: &[u8]) -> Result<Value, VllmWireError> {
    let mut rest = bytes;
    let value = rmpv::decode::read_value_with_max_depth(&mut rest, MAX_DEPTH)
        .map_err(|e| VllmWireError::Msgpack(e.to_string()))?;
    if rest.is_empty() {
        Ok(value)
    } else {
        Err(VllmWireError::TrailingBytes(rest.len()))
    }
}

/// Writes `value` as msgpack (smallest int/str/bin/array/map headers, float64 floats: the
/// same choices msgspec makes).
pub(crate) fn write(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    // Writing into a Vec cannot fail.
    let _ = rmpv::encode::write_value(&mut out, value);
    out
}

/// Appends `value` to `out`.
pub(crate) fn write_into(out: &mut Vec<u8>, value: &Value) {
    // Writing into a Vec cannot fail.
    let _ = rmpv::encode::write_value(out, value);
}

/// Appends a map with a map16 header even when fixmap would do: msgspec sizes the header
/// of an `omit_defaults` struct for all its fields before leaving any out.
pub(crate) fn write_map16(out: &mut Vec<u8>, entries: &[(Value, Value)]) {
    let len = u16::try_from(entries.len()).unwrap_or(u16::MAX);
    out.push(0xde);
    out.extend_from_slice(&len.to_be_bytes());
    for (k, v) in entries.iter().take(usize::from(len)) {
        write_into(out, k);
        write_into(out, v);
    }
}

fn kind(v: &Value) -> String {
    match v {
        Value::Nil => "nil".into(),
        Value::Boolean(_) => "bool".into(),
        Value::Integer(i) => format!("int {i}"),
        Value::F32(_) | Value::F64(_) => "float".into(),
        Value::String(_) => "str".into(),
        Value::Binary(_) => "bin".into(),
        Value::Array(a) => format!("array of {}", a.len()),
        Value::Map(m) => format!("map of {}", m.len()),
        Value::Ext(code, _) => format!("ext type {code}"),
    }
}

pub(crate) fn type_err(at: At, expected: &'static str, v: &Value) -> VllmWireError {
    VllmWireError::Type {
        at: format!("{}.{}", at.0, at.1),
        expected,
        found: kind(v),
    }
}

pub(crate) fn get_str(v: &Value, at: At) -> Result<String, VllmWireError> {
    match v {
        Value::String(s) => s
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| type_err(at, "utf-8 str", v)),
        _ => Err(type_err(at, "str", v)),
    }
}

pub(crate) fn get_i64(v: &Value, at: At) -> Result<i64, VllmWireError> {
    v.as_i64().ok_or_else(|| type_err(at, "int (i64)", v))
}

pub(crate) fn get_u64(v: &Value, at: At) -> Result<u64, VllmWireError> {
    v.as_u64()
        .ok_or_else(|| type_err(at, "non-negative int (u64)", v))
}

pub(crate) fn get_u32(v: &Value, at: At) -> Result<u32, VllmWireError> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| type_err(at, "token id (u32)", v))
}

/// A msgspec `float` field also accepts an int, as msgspec does.
pub(crate) fn get_f64(v: &Value, at: At) -> Result<f64, VllmWireError> {
    match v {
        Value::F64(f) => Ok(*f),
        Value::F32(f) => Ok(f64::from(*f)),
        Value::Integer(i) => i
            .as_i64()
            .map(|n| n as f64)
            .or_else(|| i.as_u64().map(|n| n as f64))
            .ok_or_else(|| type_err(at, "float", v)),
        _ => Err(type_err(at, "float", v)),
    }
}

pub(crate) fn get_bool(v: &Value, at: At) -> Result<bool, VllmWireError> {
    v.as_bool().ok_or_else(|| type_err(at, "bool", v))
}

pub(crate) fn get_array(v: &Value, at: At) -> Result<&[Value], VllmWireError> {
    match v {
        Value::Array(a) => Ok(a),
        _ => Err(type_err(at, "array", v)),
    }
}

pub(crate) fn get_map(v: &Value, at: At) -> Result<&[(Value, Value)], VllmWireError> {
    match v {
        Value::Map(m) => Ok(m),
        _ => Err(type_err(at, "map", v)),
    }
}

/// `None` for nil, else `f(v)`.
pub(crate) fn opt<T>(
    v: &Value,
    at: At,
    f: impl FnOnce(&Value, At) -> Result<T, VllmWireError>,
) -> Result<Option<T>, VllmWireError> {
    if v.is_nil() {
        Ok(None)
    } else {
        f(v, at).map(Some)
    }
}

pub(crate) fn list<T>(
    v: &Value,
    at: At,
    f: impl Fn(&Value, At) -> Result<T, VllmWireError>,
) -> Result<Vec<T>, VllmWireError> {
    get_array(v, at)?.iter().map(|x| f(x, at)).collect()
}

pub(crate) fn str_list(v: &Value, at: At) -> Result<Vec<String>, VllmWireError> {
    list(v, at, get_str)
}

pub(crate) fn u32_list(v: &Value, at: At) -> Result<Vec<u32>, VllmWireError> {
    list(v, at, get_u32)
}

/// The fields of a msgspec `array_like` struct: positions past the end of a shorter
/// array (trailing defaults omitted) read as `None`; a longer array is an error.
pub(crate) fn fields<'a>(
    v: &'a Value,
    name: &'static str,
    max: usize,
    required: usize,
) -> Result<&'a [Value], VllmWireError> {
    let items = get_array(v, (name, "<struct>"))?;
    if items.len() > max {
        return Err(VllmWireError::TooManyFields {
            name,
            len: items.len(),
            max,
        });
    }
    if items.len() < required {
        return Err(VllmWireError::MissingField {
            name,
            field: format!("#{} of {required} required", items.len()),
        });
    }
    Ok(items)
}

pub(crate) fn opt_value<T>(v: &Option<T>, f: impl FnOnce(&T) -> Value) -> Value {
    v.as_ref().map_or(Value::Nil, f)
}

pub(crate) fn str_values(v: &[String]) -> Value {
    Value::Array(v.iter().map(|s| Value::from(s.as_str())).collect())
}

pub(crate) fn u32_values(v: &[u32]) -> Value {
    Value::Array(v.iter().map(|&n| Value::from(n)).collect())
}

/// A Python dict whose insertion order is its wire order. In JSON (fixtures, logs) it is
/// `{"__map__": [[key, value], ...]}` so the order and non-string keys survive.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OrderedMap<K, V>(pub Vec<(K, V)>);

impl<K: Serialize, V: Serialize> Serialize for OrderedMap<K, V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(1))?;
        m.serialize_entry("__map__", &self.0)?;
        m.end()
    }
}

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Tagged<K, V> {
            #[serde(rename = "__map__")]
            map: Vec<(K, V)>,
        }
        Tagged::deserialize(d).map(|t| OrderedMap(t.map))
    }
}

/// An untyped value (`Any` in vLLM's annotations), kept as msgpack. In JSON a map is
/// `{"__map__": [[k, v], ...]}` and bin is `{"__bytes__": [...]}`, as for [`OrderedMap`].
#[derive(Debug, Clone, PartialEq)]
pub struct Any(pub Value);

impl Serialize for Any {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let json = any_to_json(&self.0).map_err(serde::ser::Error::custom)?;
        json.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Any {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = serde_json::Value::deserialize(d)?;
        any_from_json(&json).map(Any).map_err(de::Error::custom)
    }
}

fn any_to_json(v: &Value) -> Result<serde_json::Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        Value::Nil => J::Null,
        Value::Boolean(b) => J::Bool(*b),
        Value::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(n), _) => J::from(n),
            (None, Some(n)) => J::from(n),
            _ => return Err(format!("unrepresentable int {i}")),
        },
        Value::F32(f) => J::from(f64::from(*f)),
        Value::F64(f) => J::from(*f),
        Value::String(s) => J::from(s.as_str().ok_or("non-utf-8 str")?),
        Value::Binary(b) => serde_json::json!({ "__bytes__": b }),
        Value::Array(a) => J::Array(a.iter().map(any_to_json).collect::<Result<_, _>>()?),
        Value::Map(m) => {
            let pairs = m
                .iter()
                .map(|(k, v)| Ok(J::Array(vec![any_to_json(k)?, any_to_json(v)?])))
                .collect::<Result<Vec<_>, String>>()?;
            serde_json::json!({ "__map__": pairs })
        }
        Value::Ext(code, _) => return Err(format!("ext type {code} has no JSON form")),
    })
}

fn any_from_json(j: &serde_json::Value) -> Result<Value, String> {
    use serde_json::Value as J;
    Ok(match j {
        J::Null => Value::Nil,
        J::Bool(b) => Value::Boolean(*b),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Value::from(i),
            (None, Some(u), _) => Value::from(u),
            (_, _, Some(f)) => Value::F64(f),
            _ => return Err(format!("unrepresentable number {n}")),
        },
        J::String(s) => Value::from(s.as_str()),
        J::Array(a) => Value::Array(a.iter().map(any_from_json).collect::<Result<_, _>>()?),
        J::Object(o) => {
            if let Some(J::Array(pairs)) = o.get("__map__") {
                let mut out = Vec::with_capacity(pairs.len());
                for pair in pairs {
                    match pair {
                        J::Array(kv) if kv.len() == 2 => {
                            out.push((any_from_json(&kv[0])?, any_from_json(&kv[1])?))
                        }
                        _ => return Err("__map__ entries must be [key, value]".into()),
                    }
                }
                Value::Map(out)
            } else if let Some(J::Array(bytes)) = o.get("__bytes__") {
                let b = bytes
                    .iter()
                    .map(|x| x.as_u64().and_then(|n| u8::try_from(n).ok()))
                    .collect::<Option<Vec<u8>>>()
                    .ok_or("__bytes__ must hold bytes")?;
                Value::Binary(b)
            } else {
                return Err(
                    "a JSON object must be {\"__map__\": ...} or {\"__bytes__\": ...}".into(),
                );
            }
        }
    })
}
