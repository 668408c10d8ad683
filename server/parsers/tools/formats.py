"""The tool-call parser names (``--tool-call-parser``, vLLM's names), each format's
marker strings and the rules of the ``auto`` choice, plus the prefill of the formats that
force a call natively. Rust: rust/server/src/parsers/tools/formats.rs.

The names, their order, every marker (with the source of its bytes) and the ``auto`` rules
are ``server/contracts/tool_formats.json``'s, which both frontends read; the parsers'
modules hold the grammar and take every marker from here. Only the ``native`` formats there
(``demo``, ``hermes``) force a call natively (a prefill of the begin marker, see
:func:`prefill`); the others use the format-independent JSON forcing of
:mod:`server.parsers.tools.grammar`.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from server.parsers.markers import TemplateRule
from server.parsers.tools.settings import ToolSettings


class ToolFormat(msgspec.Struct, frozen=True):
    """A format's call markers (``end`` is empty where calls have no end marker)."""

    begin: str
    end: str


class FormatSpec(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One format of the contract file (empty strings: the format has no such marker)."""

    name: str
    begin: str
    end: str
    source: str
    native: bool = False
    args: str = ""
    call_begin: str = ""
    call_end: str = ""
    call_type: str = ""
    sep: str = ""
    args_begin: str = ""
    args_end: str = ""
    call_sep: str = ""
    function: str = ""
    function_end: str = ""
    parameter: str = ""
    parameter_end: str = ""


class _Auto(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    template: tuple[TemplateRule, ...]
    model_type: dict[str, str]


class _Contract(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    about: str
    formats: tuple[FormatSpec, ...]
    auto: _Auto


PATH = Path(__file__).resolve().parents[2] / "contracts" / "tool_formats.json"
_CONTRACT = msgspec.json.decode(PATH.read_bytes(), type=_Contract)
SPECS = {f.name: f for f in _CONTRACT.formats}
# ``auto``: template rules in order (the first whose strings all appear wins), then
# config.json's model_type -> format.
TEMPLATE_RULES = _CONTRACT.auto.template
MODEL_TYPE_PARSERS = _CONTRACT.auto.model_type

DEMO_BEGIN, DEMO_END = SPECS["demo"].begin, SPECS["demo"].end
HERMES_BEGIN, HERMES_END = SPECS["hermes"].begin, SPECS["hermes"].end
PYTHON_TAG, LLAMA_CALL_SEP = SPECS["llama3_json"].begin, SPECS["llama3_json"].call_sep
MISTRAL_CALLS, MISTRAL_ARGS = SPECS["mistral"].begin, SPECS["mistral"].args
_DEEPSEEK = SPECS["deepseek_v3"]
DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALLS_END = _DEEPSEEK.begin, _DEEPSEEK.end
DEEPSEEK_CALL_BEGIN, DEEPSEEK_CALL_END = _DEEPSEEK.call_begin, _DEEPSEEK.call_end
DEEPSEEK_SEP, DEEPSEEK_CALL_TYPE = _DEEPSEEK.sep, _DEEPSEEK.call_type
DEEPSEEK_ARGS_BEGIN, DEEPSEEK_ARGS_END = _DEEPSEEK.args_begin, _DEEPSEEK.args_end
_QWEN = SPECS["qwen3_coder"]
QWEN_BEGIN, QWEN_END = _QWEN.begin, _QWEN.end
QWEN_FUNCTION, QWEN_FUNCTION_END = _QWEN.function, _QWEN.function_end
QWEN_PARAMETER, QWEN_PARAMETER_END = _QWEN.parameter, _QWEN.parameter_end
GRANITE_CALL = SPECS["granite"].begin
PYTHON_START, PYTHON_END = SPECS["pythonic"].begin, SPECS["pythonic"].end

# In the file's order.
TOOL_CALL_PARSERS: dict[str, ToolFormat] = {
    name: ToolFormat(spec.begin, spec.end) for name, spec in SPECS.items()}
# The formats whose forced calls use their own markers (prefill + structural tag).
NATIVE_FORCING = tuple(name for name, spec in SPECS.items() if spec.native)


def forces_natively(parser: str) -> bool:
    return parser in NATIVE_FORCING


def prefill(fmt: ToolFormat, settings: ToolSettings) -> str | None:
    """Text appended to the prompt to force a call natively (None: nothing is forced)."""
    if settings.mode == "required":
        return fmt.begin
    if settings.mode == "named":
        return fmt.begin + call_prefix(settings.name or "")
    return None


def call_prefix(name: str, key: str = "arguments") -> str:
    """The start of a named call's JSON body, up to its arguments."""
    return '{"name": ' + json.dumps(name, ensure_ascii=False) + f', "{key}": '
