//! `qwen3_coder` (Qwen3-Coder model card and chat template): the grammar of XML-style calls
//! (`<function=NAME>`, `<parameter=P>` VALUE `</parameter>` ...), committed at the function
//! tag, each parameter typed by the schema ([`typed`](super::typed)) and given when its end
//! tag arrives; the markers are the contract file's ([`ToolFormat::markers`]). Mirrors
//! `server/parsers/tools/qwen3_coder.py`. Behaviour: docs/api.md, "Tool calls".

use serde_json::Value;

use super::formats::{Markers, ToolFormat};
use super::json_call::{Cursor, Found, Stop};
use super::typed::{json_string, param_type, typed};

/// The contract file's markers of this format.
fn markers() -> &'static Markers {
    ToolFormat::Qwen3Coder.markers()
}

/// From the begin marker to the commit point.
pub fn pre(cur: &mut Cursor<'_>, known: &dyn Fn(&str) -> bool) -> Result<Found, Stop> {
    cur.expect(&markers().begin)?;
    cur.ws();
    cur.expect(&markers().function)?;
    let start = cur.i;
    let name = cur.take_while(|c| !matches!(c, '>' | '<' | '\n'))?;
    cur.expect(">").map_err(|e| at(e, start))?;
    if !known(name) {
        return Err(Stop::Fail(cur.i));
    }
    Ok(Found::Params {
        at: cur.i,
        name: name.to_owned(),
    })
}

/// What comes next in a committed call.
#[derive(Debug, PartialEq)]
pub enum Item {
    /// `"P": V`.
    Param(String),
    /// `</function>`.
    End,
}

/// The next parameter or the function's end (`parameters`: the function's schema).
pub fn item(cur: &mut Cursor<'_>, parameters: Option<&Value>) -> Result<Item, Stop> {
    cur.ws();
    if cur.lit(&markers().function_end)? {
        return Ok(Item::End);
    }
    let start = cur.i;
    let param = (|| {
        cur.expect(&markers().parameter)?;
        let p = cur.take_while(|c| !matches!(c, '>' | '<' | '\n'))?;
        cur.expect(">")?;
        let value = cur.until(&markers().parameter_end)?;
        let value = value.strip_prefix('\n').unwrap_or(value);
        let value = value.strip_suffix('\n').unwrap_or(value);
        Ok(format!(
            "{}: {}",
            json_string(p),
            typed(value, param_type(parameters, p))
        ))
    })()
    .map_err(|e| at(e, start))?;
    Ok(Item::Param(param))
}

/// A failure inside an element counts from the element's start.
pub fn at(e: Stop, start: usize) -> Stop {
    match e {
        Stop::Need => Stop::Need,
        Stop::Fail(_) => Stop::Fail(start),
    }
}
