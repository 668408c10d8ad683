"""Tool calling (``--tool-call-parser``, vLLM's parser names): the request's settings
(:mod:`.settings`), the formats' markers (:mod:`.formats`), the streaming parser and its
deltas (:mod:`.parser`, :mod:`.scanner`), the formats (:mod:`.json_call`,
:mod:`.json_formats`, :mod:`.qwen3_coder`, :mod:`.pythonic`, :mod:`.typed`) and forcing by
structural tags (:mod:`.grammar`). Mirrors ``rust/server/src/parsers/tools.rs``; this module
only re-exports."""

from server.parsers.tools.formats import (
    NATIVE_FORCING,
    TOOL_CALL_PARSERS,
    ToolFormat,
    call_prefix,
    forces_natively,
    prefill,
)
from server.parsers.tools.grammar import forced_tag, json_forced_tag
from server.parsers.tools.json_call import parse_call
from server.parsers.tools.parser import (
    CallAccumulator,
    ToolCall,
    ToolCallParser,
    mistral_call_id,
    new_call_id,
)
from server.parsers.tools.scanner import CallDelta, ToolDelta
from server.parsers.tools.settings import ToolSettings, check_tools, choice_text, tool_settings

__all__ = [
    "NATIVE_FORCING", "TOOL_CALL_PARSERS", "CallAccumulator", "CallDelta",
    "ToolCall", "ToolCallParser", "ToolDelta", "ToolFormat", "ToolSettings", "call_prefix",
    "check_tools", "choice_text", "forced_tag", "forces_natively", "json_forced_tag",
    "mistral_call_id", "new_call_id", "parse_call", "prefill", "tool_settings",
]
