//! The settings of `vrs-rs render` ([`RenderArgs`]): the shared keys and `render`'s own.

use serde::Deserialize;

use super::{CommandArgs, Specific};

/// The resolved settings of one `render` run.
pub type RenderArgs = CommandArgs<RenderSpecific>;

/// The settings of `render` alone.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize, Default))]
pub struct RenderSpecific {
    #[serde(default)]
    pub max_model_len: Option<u64>,
    /// As `serve`'s: decides the prefill of forced tool calls (default `auto`).
    #[serde(default)]
    pub tool_call_parser: Option<String>,
    /// As `serve`'s: decides which markers a rendered prompt leaves open (default `auto`).
    #[serde(default)]
    pub reasoning_parser: Option<String>,
}

impl Specific for RenderSpecific {
    fn check(args: &RenderArgs) -> Result<(), String> {
        if args.specific.max_model_len == Some(0) {
            return Err("max_model_len must be >= 1; got 0".into());
        }
        crate::parsers::select::check_tool_setting(args.specific.tool_call_parser.as_deref())?;
        crate::parsers::select::check_reasoning_setting(args.specific.reasoning_parser.as_deref())?;
        Ok(())
    }
}
