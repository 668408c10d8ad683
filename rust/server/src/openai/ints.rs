//! The integer request fields' deserializers: a number outside the field's range (i64, or
//! u32 for token ids), written as an integer or as a float (`-1e30`; serde_json reads an
//! integer literal beyond 64 bits as a float too), is refused as out of range, not as a
//! float; a float inside the range stays a type error. The Python server words it the
//! same (`server/validate/params.py`, `range_error`).

use std::fmt;

use serde::de::{self, Deserializer, Unexpected, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// How an i64 field's number out of range is refused.
pub const I64_RANGE: &str =
    "the number is out of range for i64 (-9223372036854775808 to 9223372036854775807)";
/// How a u32 entry's number out of range is refused.
pub const U32_RANGE: &str = "the number is out of range for u32 (0 to 4294967295)";

/// 2^63 as a float: the floats in [-2^63, 2^63) fit in an i64.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;
/// 2^32 as a float.
const TWO_32: f64 = 4_294_967_296.0;

/// Whether `value` is a number without a fraction outside the i64 range: the integer
/// checks of the Responses and Messages routes refuse it as out of range too.
pub fn beyond_i64(value: &Value) -> bool {
    if value.is_i64() {
        return false;
    }
    value.is_u64()
        || value
            .as_f64()
            .is_some_and(|v| v.fract() == 0.0 && !(-TWO_63..TWO_63).contains(&v))
}

/// An i64 field: `#[serde(default, deserialize_with = "ints::opt_i64")]`.
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Option::<I64>::deserialize(d).map(|v| v.map(|v| v.0))
}

/// A list of u32 token ids: `#[serde(default, deserialize_with = "ints::opt_u32s")]`.
pub fn opt_u32s<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u32>>, D::Error> {
    Option::<Vec<U32>>::deserialize(d).map(|v| v.map(|ids| ids.into_iter().map(|v| v.0).collect()))
}

struct I64(i64);

impl<'de> Deserialize<'de> for I64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_i64(I64Visitor).map(I64)
    }
}

struct I64Visitor;

impl Visitor<'_> for I64Visitor {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("i64")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom(I64_RANGE))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if v.fract() == 0.0 && !(-TWO_63..TWO_63).contains(&v) {
            Err(E::custom(I64_RANGE))
        } else {
            Err(E::invalid_type(Unexpected::Float(v), &self))
        }
    }
}

struct U32(u32);

impl<'de> Deserialize<'de> for U32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_u32(U32Visitor).map(U32)
    }
}

struct U32Visitor;

impl Visitor<'_> for U32Visitor {
    type Value = u32;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("u32")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u32, E> {
        u32::try_from(v).map_err(|_| E::custom(U32_RANGE))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u32, E> {
        u32::try_from(v).map_err(|_| E::custom(U32_RANGE))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u32, E> {
        if v.fract() == 0.0 && !(0.0..TWO_32).contains(&v) {
            Err(E::custom(U32_RANGE))
        } else {
            Err(E::invalid_type(Unexpected::Float(v), &self))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize)]
    struct Fields {
        #[serde(default, deserialize_with = "opt_i64")]
        seed: Option<i64>,
        #[serde(default, deserialize_with = "opt_u32s")]
        ids: Option<Vec<u32>>,
    }

    fn error(value: serde_json::Value) -> String {
        serde_json::from_value::<Fields>(value)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn in_range_numbers_and_null_pass() {
        let f: Fields =
            serde_json::from_value(json!({"seed": i64::MIN, "ids": [0, u32::MAX]})).unwrap();
        assert_eq!((f.seed, f.ids), (Some(i64::MIN), Some(vec![0, u32::MAX])));
        let f: Fields = serde_json::from_value(json!({"seed": null})).unwrap();
        assert_eq!((f.seed, f.ids), (None, None));
    }

    #[test]
    fn out_of_range_is_named_whatever_its_spelling() {
        for seed in [json!(-1e30), json!(1e19), json!(u64::MAX)] {
            assert_eq!(error(json!({ "seed": seed })), I64_RANGE);
        }
        let huge: serde_json::Value = serde_json::from_str("-99999999999999999999").unwrap();
        assert_eq!(error(json!({ "seed": huge })), I64_RANGE);
        for id in [json!(-1), json!(5_000_000_000u64), json!(5e9), json!(-1e30)] {
            assert_eq!(error(json!({ "ids": [1, id] })), U32_RANGE);
        }
    }

    #[test]
    fn beyond_i64_is_any_spelling_of_a_number_out_of_range() {
        let huge: Value = serde_json::from_str("-99999999999999999999").unwrap();
        for value in [huge, json!(-1e30), json!(u64::MAX), json!(1e19)] {
            assert!(beyond_i64(&value), "{value}");
        }
        for value in [
            json!(i64::MIN),
            json!(i64::MAX),
            json!(1.5),
            json!(1e3),
            json!("1"),
        ] {
            assert!(!beyond_i64(&value), "{value}");
        }
    }

    #[test]
    fn floats_in_range_stay_type_errors() {
        assert!(error(json!({"seed": 1.5})).contains("invalid type: floating point"));
        assert!(error(json!({"seed": 1e3})).contains("invalid type: floating point"));
        assert!(error(json!({"ids": [2.5]})).contains("invalid type: floating point"));
        assert!(error(json!({"seed": "1"})).contains("invalid type: string"));
    }
}
