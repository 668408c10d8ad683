//! How pooling answers go on the wire: `encoding_format` "float" (a JSON array of the
//! values, float64 as serde writes them: the same text as the Python server's msgspec)
//! or "base64" (the values' bytes as `embed_dtype`, float32 by default, in `endianness`,
//! little-endian by default: what the OpenAI SDK decodes).

use serde::ser::Error as _;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::edge::error::ApiError;

/// `encoding_format`, and for base64 the element type and byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Float,
    Base64 { half: bool, big_endian: bool },
}

/// A string field of the body with its default, or a 400 naming it.
fn text<'a>(value: &'a Value, name: &str, default: &'a str) -> Result<&'a str, ApiError> {
    match value.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::String(s)) => Ok(s),
        Some(v) => Err(ApiError::bad(
            name,
            format!("invalid value for `{name}`: expected a string, got {v}"),
        )),
    }
}

impl Encoding {
    /// `encoding_format` (`float` | `base64`), `embed_dtype` (`float32` | `float16`) and
    /// `endianness` (`native` | `little` | `big`), checked in that order.
    pub fn of(value: &Value) -> Result<Self, ApiError> {
        let format = text(value, "encoding_format", "float")?;
        if format != "float" && format != "base64" {
            return Err(ApiError::bad(
                "encoding_format",
                format!("`encoding_format` must be `float` or `base64`, got `{format}`"),
            ));
        }
        let half = match text(value, "embed_dtype", "float32")? {
            "float32" => false,
            "float16" => true,
            other => {
                return Err(ApiError::bad(
                    "embed_dtype",
                    format!("`embed_dtype` must be one of float32, float16, got `{other}`"),
                ))
            }
        };
        let big_endian = match text(value, "endianness", "native")? {
            "native" => cfg!(target_endian = "big"),
            "little" => false,
            "big" => true,
            other => {
                return Err(ApiError::bad(
                    "endianness",
                    format!("`endianness` must be one of native, little, big, got `{other}`"),
                ))
            }
        };
        Ok(if format == "float" {
            Self::Float
        } else {
            Self::Base64 { half, big_endian }
        })
    }

    /// `values` in this encoding.
    pub fn encode(self, values: &[f64]) -> Encoded {
        match self {
            Self::Float => Encoded::Floats(values.iter().map(|&v| Float(v)).collect()),
            Self::Base64 { half, big_endian } => {
                let mut bytes = Vec::with_capacity(values.len() * 4);
                for &v in values {
                    let v = v as f32;
                    match (half, big_endian) {
                        (false, false) => bytes.extend(v.to_le_bytes()),
                        (false, true) => bytes.extend(v.to_be_bytes()),
                        (true, false) => bytes.extend(f16_bits(v).to_le_bytes()),
                        (true, true) => bytes.extend(f16_bits(v).to_be_bytes()),
                    }
                }
                Encoded::Base64(base64(&bytes))
            }
        }
    }
}

/// One answer: floats, or their base64 string.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Encoded {
    Floats(Vec<Float>),
    Base64(String),
}

/// A float as the Python server's msgspec writes it: the shortest digits that read back
/// to the value, fixed-point from 1e-5 to below 1e16, else `1e-6` / `1e16` (serde's
/// text less its exponent's `+`); not-a-number and infinities are `null`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Float(pub f64);

impl Serialize for Float {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if !self.0.is_finite() {
            return serializer.serialize_none();
        }
        let text = serde_json::to_string(&self.0).map_err(S::Error::custom)?;
        RawValue::from_string(text.replace("e+", "e"))
            .map_err(S::Error::custom)?
            .serialize(serializer)
    }
}

/// `values` as [`Float`]s.
pub fn floats(values: &[f64]) -> Vec<Float> {
    values.iter().map(|&v| Float(v)).collect()
}

/// The IEEE half-precision bits of `x`, rounded to nearest, ties to even (numpy's cast).
pub fn f16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    let round = |kept: u32, rest: u32, halfway: u32| {
        if rest > halfway || (rest == halfway && kept & 1 == 1) {
            kept + 1
        } else {
            kept
        }
    };
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let full = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let kept = full >> shift;
        let rounded = round(kept, full & ((1 << shift) - 1), 1 << (shift - 1));
        return sign | rounded as u16;
    }
    // A carry out of the mantissa moves into the exponent (up to infinity), as it should.
    let kept = ((e as u32) << 10) | (man >> 13);
    sign | round(kept, man & 0x1fff, 0x1000) as u16
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64, with padding.
pub fn base64(bytes: &[u8]) -> String {
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
    use serde_json::json;

    fn b64(values: &[f64], body: Value) -> String {
        match Encoding::of(&body).unwrap().encode(values) {
            Encoded::Base64(s) => s,
            Encoded::Floats(_) => panic!("floats for {body}"),
        }
    }

    #[test]
    fn base64_is_numpy_s_bytes() {
        // Each expected string is numpy's `base64.b64encode(np.asarray(v, dtype).tobytes())`.
        let f32s = json!({"encoding_format": "base64"});
        assert_eq!(b64(&[1.0], f32s.clone()), "AACAPw==");
        assert_eq!(b64(&[1.0, -2.0], f32s.clone()), "AACAPwAAAMA=");
        assert_eq!(b64(&[], f32s), "");
        let big = json!({"encoding_format": "base64", "endianness": "big"});
        assert_eq!(b64(&[1.0, -2.0], big), "P4AAAMAAAAA=");
        let values = [
            1.0,
            -2.0,
            0.1,
            65504.0,
            70000.0,
            1e-5,
            6e-8,
            3e-8,
            0.333333343267,
        ];
        let values = values.map(|v| f64::from(v as f32));
        let half = json!({"encoding_format": "base64", "embed_dtype": "float16"});
        assert_eq!(b64(&values, half), "ADwAwGYu/3sAfKgAAQABAFU1");
        let half_big = json!({"encoding_format": "base64", "embed_dtype": "float16",
                              "endianness": "big"});
        assert_eq!(b64(&values, half_big), "PADAAC5me/98AACoAAEAATVV");
    }

    #[test]
    fn floats_print_as_the_python_server_prints_them() {
        // msgspec's text for these values (ryu's rules: fixed from 1e-5 to below 1e16).
        let text = serde_json::to_string(&Encoding::Float.encode(&[
            0.0,
            1.0,
            0.1,
            0.00001,
            1e-6,
            1e15,
            1e16,
            0.41369757056236267,
        ]));
        let want = "[0.0,1.0,0.1,0.00001,1e-6,1000000000000000.0,1e16,0.41369757056236267]";
        assert_eq!(text.unwrap(), want);
    }

    #[test]
    fn bad_encodings_are_400s_naming_the_field() {
        for (body, param) in [
            (json!({"encoding_format": "bytes"}), "encoding_format"),
            (json!({"embed_dtype": "bfloat16"}), "embed_dtype"),
            (json!({"endianness": "middle"}), "endianness"),
            (json!({"encoding_format": 1}), "encoding_format"),
        ] {
            let err = Encoding::of(&body).unwrap_err();
            assert_eq!(err.body().error.param, Some(param), "{body}");
        }
    }
}
