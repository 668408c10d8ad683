"""Which parsers a server uses: ``--tool-call-parser`` and ``--reasoning-parser`` checked,
and their ``auto`` choice from the chat template and the model's ``config.json`` by the rules
of ``server/contracts/tool_formats.json`` and ``reasoning_formats.json``, with the reason
logged at start-up. Mirrors ``rust/server/src/parsers/select.rs``.
Behaviour: docs/api.md, "Parser choice".
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import msgspec

from server.parsers import reasoning
from server.parsers.reasoning import REASONING_PARSERS
from server.parsers.tools import formats

logger = logging.getLogger("vrs.frontend")

# Every --tool-call-parser name: the formats server/parsers/tools implements.
TOOL_CALL_PARSERS = tuple(formats.TOOL_CALL_PARSERS)


class Choice(msgspec.Struct, frozen=True):
    """A parser chosen (None: no parser), and why (for the start-up log)."""

    name: str | None
    reason: str

    def __str__(self) -> str:
        return f"{self.name or 'none'} ({self.reason})"


def tool_parser(setting: str | None, template: str | None,
                config: dict[str, Any] | None) -> Choice:
    """The tool-call parser for ``setting`` (None/``auto``: from ``template``, then
    ``config``, the model's config.json). ValueError for an unknown name."""
    if setting in (None, "auto"):
        return _auto_tool_parser(template, config)
    if setting == "none":
        return Choice(None, "explicit")
    if setting in TOOL_CALL_PARSERS:
        return Choice(setting, "explicit")
    raise ValueError(f"tool_call_parser must be one of auto, none, {', '.join(TOOL_CALL_PARSERS)}"
                     f"; got {json.dumps(setting)}")


def _auto_tool_parser(template: str | None, config: dict[str, Any] | None) -> Choice:
    if template is not None:
        for rule in formats.TEMPLATE_RULES:
            if all(m in template for m in rule.all):
                return Choice(rule.parser, f"auto: chat template has {' and '.join(rule.all)}")
    family = _model_family(config) if config is not None else None
    for known, name in formats.MODEL_TYPE_PARSERS.items():
        if family is not None and (known == family or known.replace("_", "") == family):
            return Choice(name, f"auto: config.json model_type {family}")
    family = family or "unknown: no config.json model_type"
    harmony = "; its OpenAI harmony format is not supported" if family == "gpt_oss" else ""
    return Choice(None, f"auto: no tool-call parser for this model (model_type {family})"
                        f"{harmony}; start with --tool-call-parser NAME to parse tool calls")


def _model_family(config: dict[str, Any]) -> str | None:
    """``model_type``, else the first architecture lower-cased up to ``For``."""
    model_type = config.get("model_type")
    if isinstance(model_type, str):
        return model_type
    architectures = config.get("architectures")
    if not isinstance(architectures, list) or not architectures:
        return None
    arch = architectures[0]
    if not isinstance(arch, str):
        return None
    at = arch.find("For")
    return (arch if at == -1 else arch[:at]).lower()


def reasoning_parser(setting: str | None, template: str | None) -> Choice:
    """The reasoning parser for ``setting`` (None/``auto``: from ``template``). ValueError
    for an unknown name, and for ``openai`` (not supported)."""
    names = f"auto, none, {', '.join(REASONING_PARSERS)}"
    if setting in (None, "auto"):
        return _auto_reasoning_parser(template or "")
    if setting == "none":
        return Choice(None, "explicit")
    if setting == "openai":
        raise ValueError("reasoning_parser openai (gpt-oss harmony channels) is not supported "
                         f"by vrs; use one of {names}")
    if setting in REASONING_PARSERS:
        return Choice(setting, "explicit")
    raise ValueError(f"reasoning_parser must be one of {names}; got {json.dumps(setting)}")


def _auto_reasoning_parser(source: str) -> Choice:
    for rule in reasoning.TEMPLATE_RULES:
        if all(m in source for m in rule.all):
            return Choice(rule.parser, f"auto: chat template has {' and '.join(rule.all)}")
    return Choice(None, "auto: the chat template has no reasoning markers; start with "
                        "--reasoning-parser NAME to split reasoning out")


def check_settings(tool_setting: str | None, reasoning_setting: str | None) -> None:
    """ValueError naming the setting when either is not a parser name."""
    tool_parser(tool_setting, None, None)
    reasoning_parser(reasoning_setting, None)


def choose(tool_setting: str | None, reasoning_setting: str | None, template: str | None,
           config: dict[str, Any] | None) -> tuple[Choice, Choice]:
    """Both parsers for their settings, each logged at start-up with its reason."""
    tools = tool_parser(tool_setting, template, config)
    reasoning = reasoning_parser(reasoning_setting, template)
    logger.info("tool-call parser: %s", tools)
    logger.info("reasoning parser: %s", reasoning)
    return tools, reasoning


def model_config(directory: str | Path) -> dict[str, Any] | None:
    """The model directory's config.json (None when missing or not a JSON object:
    ``auto`` then goes by the chat template alone)."""
    try:
        config = json.loads((Path(directory) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None
