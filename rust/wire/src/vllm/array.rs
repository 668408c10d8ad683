//! numpy arrays and torch tensors as vLLM's `MsgpackEncoder` writes them.
//!
//! An array is the 3-array `[dtype, shape, data]`:
//! * `dtype`: numpy's `dtype.str` (`"<i4"`, `"<f4"`) for ndarrays, torch's dtype name
//!   (`"int64"`, `"float32"`) for tensors;
//! * `shape`: an array of ints;
//! * `data`: the raw C-order bytes inline as msgpack ext type 3 ([`EXT_RAW_VIEW`]) when
//!   the array is under [`INLINE_LIMIT`] bytes (or 0-dimensional), otherwise an int: the
//!   index of the ZMQ frame that carries the bytes, counted from the msgpack message's own
//!   frame as 0 (so aux frames start at 1; on an input socket the request-type frame
//!   before the message is not counted). A map here is an out-of-band tensor, not
//!   supported.

use rmpv::Value;
use serde::{Deserialize, Serialize};

use super::msgpack::{get_array, get_str, type_err, At};
use super::VllmWireError;

/// msgpack ext type of inline array bytes (`CUSTOM_TYPE_RAW_VIEW`).
pub const EXT_RAW_VIEW: i8 = 3;
/// Arrays of at least this many bytes travel in their own frame
/// (`VLLM_MSGPACK_ZERO_COPY_THRESHOLD`, default 256).
pub const INLINE_LIMIT: usize = 256;

/// A numpy array or torch tensor: dtype string as written, shape, raw little-endian bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NdArray {
    /// `"<i4"`-style for numpy, `"int32"`-style for torch.
    pub dtype: String,
    /// Dimensions, outermost first.
    pub shape: Vec<u64>,
    /// C-order element bytes.
    pub data: Vec<u8>,
}

impl NdArray {
    /// Bytes per element of the dtype, or `None` for a dtype this crate does not know.
    pub fn item_size(&self) -> Option<usize> {
        dtype_size(&self.dtype)
    }

    /// Number of elements the shape holds.
    pub fn len(&self) -> u64 {
        self.shape.iter().product()
    }

    /// Whether the shape holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn chunks<const N: usize>(
        &self,
        want: &[&str],
    ) -> Result<impl Iterator<Item = [u8; N]> + '_, VllmWireError> {
        if !want.contains(&self.dtype.as_str()) {
            return Err(VllmWireError::Array(format!(
                "dtype {:?} is not one of {want:?}",
                self.dtype
            )));
        }
        Ok(self
            .data
            .chunks_exact(N)
            .map(|c| <[u8; N]>::try_from(c).unwrap_or([0; N])))
    }

    /// The elements as `f32` (dtype `<f4` / `float32`).
    pub fn to_f32(&self) -> Result<Vec<f32>, VllmWireError> {
        Ok(self
            .chunks::<4>(&["<f4", "float32"])?
            .map(f32::from_le_bytes)
            .collect())
    }

    /// The elements as `i64`, from any signed int dtype of 4 or 8 bytes.
    pub fn to_i64(&self) -> Result<Vec<i64>, VllmWireError> {
        match self.item_size() {
            Some(4) => Ok(self
                .chunks::<4>(&["<i4", "int32"])?
                .map(|b| i64::from(i32::from_le_bytes(b)))
                .collect()),
            _ => Ok(self
                .chunks::<8>(&["<i8", "int64"])?
                .map(i64::from_le_bytes)
                .collect()),
        }
    }

    /// Decodes `[dtype, shape, data]`, taking out-of-line bytes from `frames`.
    pub(crate) fn from_value(v: &Value, at: At, frames: &[&[u8]]) -> Result<Self, VllmWireError> {
        let items = get_array(v, at)?;
        let [dtype, shape, data] = items else {
            return Err(type_err(at, "[dtype, shape, data]", v));
        };
        let dtype = get_str(dtype, at)?;
        let shape = get_array(shape, at)?
            .iter()
            .map(|d| d.as_u64().ok_or_else(|| type_err(at, "array dimension", d)))
            .collect::<Result<Vec<u64>, _>>()?;
        let data = match data {
            Value::Ext(EXT_RAW_VIEW, bytes) => bytes.clone(),
            Value::Integer(i) => {
                let index = i
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(usize::MAX);
                if index == 0 || index >= frames.len() {
                    return Err(VllmWireError::AuxFrame {
                        at: format!("{}.{}", at.0, at.1),
                        index: i.as_i64().unwrap_or(-1),
                        frames: frames.len(),
                    });
                }
                frames[index].to_vec()
            }
            Value::Map(_) => {
                return Err(VllmWireError::Array(format!(
                    "{}.{}: out-of-band tensor (a map in place of data) is not supported",
                    at.0, at.1
                )))
            }
            other => return Err(type_err(at, "ext type 3 or aux frame index", other)),
        };
        let array = NdArray { dtype, shape, data };
        if let Some(size) = array.item_size() {
            let need = array.len().saturating_mul(size as u64);
            if need != array.data.len() as u64 {
                return Err(VllmWireError::Array(format!(
                    "{}.{}: dtype {} shape {:?} needs {need} bytes, data has {}",
                    at.0,
                    at.1,
                    array.dtype,
                    array.shape,
                    array.data.len()
                )));
            }
        }
        Ok(array)
    }

    /// Encodes as `[dtype, shape, data]`, moving large data into a new aux frame.
    pub(crate) fn to_value(&self, aux: &mut Vec<Vec<u8>>) -> Value {
        let shape = Value::Array(self.shape.iter().map(|&d| Value::from(d)).collect());
        let data = if self.shape.is_empty() || self.data.len() < INLINE_LIMIT {
            Value::Ext(EXT_RAW_VIEW, self.data.clone())
        } else {
            aux.push(self.data.clone());
            Value::from(aux.len() as u64)
        };
        Value::Array(vec![Value::from(self.dtype.as_str()), shape, data])
    }
}

/// Bytes per element of a numpy (`"<f4"`) or torch (`"float32"`) dtype string.
pub fn dtype_size(dtype: &str) -> Option<usize> {
    Some(match dtype {
        "|b1" | "|i1" | "|u1" | "bool" | "int8" | "uint8" => 1,
        "<i2" | "<u2" | "<f2" | "int16" | "uint16" | "float16" | "bfloat16" => 2,
        "<i4" | "<u4" | "<f4" | "int32" | "uint32" | "float32" => 4,
        "<i8" | "<u8" | "<f8" | "int64" | "uint64" | "float64" => 8,
        _ => return None,
    })
}
