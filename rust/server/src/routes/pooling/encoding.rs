//! How pooling answers go on the wire: `encoding_format` ("float": a JSON array;
//! "base64": the float32 little-endian bytes, base64), and the floats themselves, printed
//! as Python's `json` prints a float (its `repr`), so that both frontends write the same
//! bytes for the same value.

use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::edge::error::ApiError;

/// `encoding_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Float,
    Base64,
}

impl Encoding {
    /// The `encoding_format` field (absent or null: "float"); any other value is a 400.
    pub fn of(value: Option<&Value>) -> Result<Self, ApiError> {
        match value {
            None | Some(Value::Null) => Ok(Self::Float),
            Some(Value::String(s)) if s == "float" => Ok(Self::Float),
            Some(Value::String(s)) if s == "base64" => Ok(Self::Base64),
            Some(other) => Err(ApiError::bad(
                "encoding_format",
                format!("`encoding_format` must be \"float\" or \"base64\", got {other}"),
            )),
        }
    }

    /// `values` in this encoding.
    pub fn encode(self, values: &[f64]) -> Encoded {
        match self {
            Self::Float => Encoded::Floats(values.iter().map(|&v| PyFloat(v)).collect()),
            Self::Base64 => Encoded::Base64(base64_f32(values)),
        }
    }
}

/// One answer: floats, or their base64 string.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Encoded {
    Floats(Vec<PyFloat>),
    Base64(String),
}

/// A float serialized as Python's `repr` writes it: the shortest digits that read back
/// to the same value, fixed-point for exponents from -5 to 15 (`0.0001`, `1.0`),
/// scientific otherwise (`1e-05`, `1.5e+16`). Not-a-number and infinities are `null`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PyFloat(pub f64);

impl Serialize for PyFloat {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !self.0.is_finite() {
            return serializer.serialize_none();
        }
        RawValue::from_string(py_repr(self.0))
            .map_err(S::Error::custom)?
            .serialize(serializer)
    }
}

/// `x` (finite) as Python's `repr(float)`.
pub fn py_repr(x: f64) -> String {
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let sign = if x.is_sign_negative() { "-" } else { "" };
    // The value is 0.DIGITS × 10^point.
    let point = exp + 1;
    let n = digits.len() as i32;
    let body = if !(-4 < point && point <= 16) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{first}{dot}{rest}e{esign}{:02}", exp.abs())
    } else if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point < n {
        let (whole, frac) = digits.split_at(point as usize);
        format!("{whole}.{frac}")
    } else {
        format!("{digits}{}.0", "0".repeat((point - n) as usize))
    };
    format!("{sign}{body}")
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The values as float32, little-endian, in standard base64 (with padding).
pub fn base64_f32(values: &[f64]) -> String {
    let bytes: Vec<u8> = values
        .iter()
        .flat_map(|&v| (v as f32).to_le_bytes())
        .collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-0.000012345, "-1.2345e-05"),
            (123456789.0, "123456789.0"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e100, "1e+100"),
            (f64::from(0.1f32), "0.10000000149011612"),
            (0.5773502691896258, "0.5773502691896258"),
            (0.41369757056236267, "0.41369757056236267"),
        ];
        for (x, want) in cases {
            assert_eq!(py_repr(x), want, "{x:e}");
        }
        let json = serde_json::to_string(&[PyFloat(1.0), PyFloat(1e-7), PyFloat(f64::NAN)]);
        assert_eq!(json.unwrap(), "[1.0,1e-07,null]");
    }

    #[test]
    fn base64_is_float32_little_endian() {
        // 1.0f32 = 00 00 80 3f; -2.0f32 = 00 00 00 c0.
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
        assert_eq!(base64_f32(&[1.0, -2.0]), "AACAPwAAAMA=");
        assert_eq!(base64_f32(&[]), "");
        assert_eq!(base64_f32(&[0.0, 0.0, 0.0]), "AAAAAAAAAAAAAAAA");
    }
}
