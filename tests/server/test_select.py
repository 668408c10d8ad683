"""``auto`` choice of the tool-call and reasoning parsers through the shared case table
tests/parser_cases/select.jsonl (as rust/server/src/parsers/select/tests.rs), and the
settings' checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from server.parsers.select import (
    Choice,
    check_settings,
    model_config,
    reasoning_parser,
    tool_parser,
)
from tests.server.case_tables import case_table

pytestmark = pytest.mark.unit

CASES = case_table("select")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_case_table(case: dict[str, Any]) -> None:
    tool = tool_parser("auto", case["template"], case["config"])
    reasoning = reasoning_parser(None, case["template"])
    assert tool.name == case["tool"], str(tool)
    assert reasoning.name == case["reasoning"], str(reasoning)
    assert case["reason"] in tool.reason


def test_settings() -> None:
    assert tool_parser("granite", "<tool_call></tool_call>", None) == Choice("granite", "explicit")
    assert tool_parser("none", None, None) == Choice(None, "explicit")
    with pytest.raises(ValueError, match='qwen3_coder.*"xml"'):
        tool_parser("xml", None, None)
    assert reasoning_parser("mistral", None) == Choice("mistral", "explicit")
    assert reasoning_parser("none", "<think>") == Choice(None, "explicit")
    with pytest.raises(ValueError, match="openai .*not supported.*granite"):
        reasoning_parser("openai", None)
    with pytest.raises(ValueError, match="deepseek_r1"):
        check_settings(None, "o1")
    check_settings(None, None)
    assert str(tool_parser(None, "<tool_call></tool_call>", None)) == (
        "hermes (auto: chat template has <tool_call> and </tool_call>)")


def test_config_json_of_a_directory(tmp_path: Path) -> None:
    assert model_config(tmp_path) is None
    (tmp_path / "config.json").write_text('{"model_type": "llama"}', encoding="utf-8")
    assert tool_parser(None, None, model_config(tmp_path)).name == "llama3_json"
    (tmp_path / "config.json").write_text("[1]", encoding="utf-8")
    assert model_config(tmp_path) is None
