"""The tool-call parser names (``--tool-call-parser``, vLLM's names) and each format's
marker strings, plus the prefill of the formats that force a call natively.
Rust: rust/server/src/parsers/tools/formats.rs.

The names, their order and every marker (with the source of its bytes) are
``server/contracts/tool_formats.json``'s, which both frontends read; the parsers' modules
hold the grammar. Only the ``native`` formats there (``demo``, ``hermes``) force a call
natively (a prefill of the begin marker, see :func:`prefill`); the others use the
format-independent JSON forcing of :mod:`server.parsers.tools.grammar`.
"""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

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
    sep: str = ""


class _Contract(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    about: str
    formats: tuple[FormatSpec, ...]


PATH = Path(__file__).resolve().parents[2] / "contracts" / "tool_formats.json"
SPECS = {f.name: f for f in msgspec.json.decode(PATH.read_bytes(), type=_Contract).formats}

DEMO_BEGIN, DEMO_END = SPECS["demo"].begin, SPECS["demo"].end
HERMES_BEGIN, HERMES_END = SPECS["hermes"].begin, SPECS["hermes"].end
PYTHON_TAG = SPECS["llama3_json"].begin
MISTRAL_CALLS, MISTRAL_ARGS = SPECS["mistral"].begin, SPECS["mistral"].args
_DEEPSEEK = SPECS["deepseek_v3"]
DEEPSEEK_CALLS_BEGIN, DEEPSEEK_CALLS_END = _DEEPSEEK.begin, _DEEPSEEK.end
DEEPSEEK_CALL_BEGIN, DEEPSEEK_CALL_END = _DEEPSEEK.call_begin, _DEEPSEEK.call_end
DEEPSEEK_SEP = _DEEPSEEK.sep
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
